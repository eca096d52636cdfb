"""What a checkpoint's dataclasses must hold, declared beside their fields, and the one check
every loaded state goes through before any of it is used.

A state dataclass's annotations are its types (``int``, ``float``, ``str``, ``torch.Tensor``,
``X | None``, ``tuple[SeedChain, ...]``, ``list[AdamState]``, ``dict[int, SeedChain]``,
another dataclass), and its fields' metadata says what else they must be:

- ``tensor(("cells", "d"), torch.float64, "finite")``: a shape in named dimensions, a dtype
  and the values allowed;
- ``integer(0, "cells")``: an integer, a dict's keys or a sequence's items, in ``[low,
  high)``; ``real("finite")``: a number; ``choice("train", "validate")``: one of some
  strings; ``length("M")``: a sequence's length.

A dimension is a number or a name. ``build(cls, values, dims)`` gives the named ones the
values the loading optimizer knows from its config (``Optimizer.state_dims``: ``D``, the
parameters, ``cells``, ``M``, ``d``); a name it does not know is bound by its first use,
and every later use must agree (an archive's points and its centres' behaviour share
``d``). The first field that disagrees is a ``CheckpointError`` of one line naming the
field, what it holds and what was expected; nothing is built until every field passed.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class S:
...     x: torch.Tensor = field(default=None, metadata=tensor(("D",), torch.float32))
>>> build(S, {"x": torch.zeros(3)}, {"D": 3}).x.shape
torch.Size([3])
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing

import torch

from neuroevo.errors import CheckpointError

INT64 = (-(2**63), 2**63 - 1)  # what a tensor, numpy or TensorBoard can hold of an integer
VALUES = {  # what a tensor or a number may hold
    "finite": (lambda t: bool(torch.isfinite(t).all()), "finite values"),
    "finite_or_-inf": (lambda t: not bool((torch.isnan(t) | (t == math.inf)).any()),
                       "finite values or -inf"),
    "nonnegative": (lambda t: bool((torch.isfinite(t) & (t >= 0)).all()),
                    "finite values >= 0"),
    "positive": (lambda t: bool((torch.isfinite(t) & (t > 0)).all()), "finite values > 0"),
}


def tensor(shape: tuple | None, dtype: torch.dtype, values: str = "finite") -> dict:
    """A tensor field's metadata: ``shape`` in dimensions (numbers or names; None: any)."""
    return {"shape": None if shape is None else tuple(shape), "dtype": dtype, "values": values}


def integer(low: int = 0, high: int | str | None = None) -> dict:
    """An integer's range ``[low, high)`` (``high`` a dimension, or None: no bound)."""
    return {"range": (low, high)}


def real(values: str = "finite") -> dict:
    return {"values": values}


def choice(*options: str) -> dict:
    return {"choices": options}


def length(dim: int | str) -> dict:
    return {"length": dim}


def build(cls: type, values, dims: dict, where: str = "state"):
    """``cls(**values)`` once every field is what ``cls`` declares, else a one-line
    ``CheckpointError``; a field ``values`` lacks takes its default (a file written before
    the field existed), one with no default or one ``cls`` lacks is refused."""
    return _Checker(dims).fields(cls, values, where)


def check(cls: type, value, dims: dict, where: str) -> None:
    """Refuse ``value`` unless it is the type ``cls`` (any annotation ``build`` reads)."""
    _Checker(dims).value(cls, value, {}, where)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {list(value.shape)}"
    text = " ".join(repr(value).split())  # one line, whatever the value's repr spans
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


class _Checker:
    def __init__(self, dims: dict):
        self.dims = {k: v for k, v in dims.items() if v is not None}

    def fail(self, where: str, value, expected: str):
        raise CheckpointError(f"{where} holds {_describe(value)}, expected {expected}")

    def fields(self, cls: type, values, where: str):
        if dataclasses.is_dataclass(values) and not isinstance(values, type):
            values = {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
        if not isinstance(values, dict):
            self.fail(where, values, f"the fields of {cls.__name__}")
        declared = {f.name: f for f in dataclasses.fields(cls)}
        extra = sorted(map(str, set(values) - set(declared)))
        if extra:
            raise CheckpointError(f"{where} has a field {extra[0]!r} that {cls.__name__} does "
                                  f"not have (its fields: {', '.join(declared)})")
        hints = typing.get_type_hints(cls)
        out = {}
        for name, f in declared.items():
            if name not in values:
                if (f.default is dataclasses.MISSING and
                        f.default_factory is dataclasses.MISSING):
                    raise CheckpointError(f"{where} lacks the field {name!r} of {cls.__name__}")
                continue
            self.value(hints[name], values[name], f.metadata, f"{where}.{name}")
            out[name] = copy.deepcopy(values[name])
        return cls(**out)

    def value(self, hint, value, meta, where: str) -> None:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return
            options = [a for a in args if a is not type(None)]
            if len(options) != 1:
                raise TypeError(f"schema: {where} needs one type besides None, has {hint}")
            return self.value(options[0], value, meta, where)
        if hint is torch.Tensor:
            return self.tensor(value, meta, where)
        if origin in (tuple, list):
            return self.sequence(origin, args, value, meta, where)
        if origin is dict or hint is dict:
            return self.mapping(args, value, meta, where)
        if hint is list:
            return self.sequence(list, (), value, meta, where)
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, hint):
                self.fail(where, value, f"a {hint.__name__}")
            self.fields(hint, value, where)
            return None
        return self.scalar(hint, value, meta, where)

    def scalar(self, hint, value, meta, where: str) -> None:
        if hint is bool:
            if not isinstance(value, bool):
                self.fail(where, value, "true or false")
        elif hint is int:
            if not isinstance(value, int) or isinstance(value, bool):
                self.fail(where, value, "an integer")
            if not INT64[0] <= value <= INT64[1]:
                self.fail(where, value, "an integer within int64")
            low, high = meta.get("range", (None, None))
            bound = self.size(high, where) if high is not None else None
            if (low is not None and value < low) or (bound is not None and value >= bound):
                top = f"below {bound}" + (f" ({high})" if isinstance(high, str) else "")
                self.fail(where, value, f"an integer >= {low}" + (f" and {top}" if bound
                                                                   is not None else ""))
        elif hint is float:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                self.fail(where, value, "a number")
            rule = meta.get("values", "finite")
            ok, text = VALUES[rule]
            if not ok(torch.tensor(float(value), dtype=torch.float64)):
                self.fail(where, value, f"a number of {text}")
        elif hint is str:
            if not isinstance(value, str):
                self.fail(where, value, "a string")
            options = meta.get("choices")
            if options and value not in options:
                self.fail(where, value, f"one of {', '.join(options)}")
        else:
            raise TypeError(f"schema: {where} has a type it cannot check: {hint}")

    def tensor(self, value, meta, where: str) -> None:
        if not isinstance(value, torch.Tensor):
            self.fail(where, value, "a tensor")
        shape, dtype = meta.get("shape"), meta.get("dtype")
        if dtype is not None and value.dtype != dtype:
            self.fail(where, value, f"dtype {str(dtype).removeprefix('torch.')}")
        if shape is not None:
            if value.ndim != len(shape):
                self.fail(where, value, f"{len(shape)} dimensions {self.shown(shape)}")
            for dim, size in zip(shape, value.shape, strict=True):
                if isinstance(dim, str) and dim not in self.dims:
                    self.dims[dim] = int(size)
                if size != self.size(dim, where):
                    self.fail(where, value, f"shape {self.shown(shape)}")
        ok, text = VALUES[meta.get("values", "finite")]
        if not ok(value.detach()):
            raise CheckpointError(f"{where} holds values that are not {text}: "
                                  f"{self.bad(value)}")

    def sequence(self, origin, args, value, meta, where: str) -> None:
        if not isinstance(value, origin):
            self.fail(where, value, f"a {origin.__name__}")
        if "length" in meta:
            want = self.size(meta["length"], where)
            if len(value) != want:
                self.fail(where, value, f"{want} items ({meta['length']})")
        inner = {k: v for k, v in meta.items() if k != "length"}  # the items' own ranges
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                self.fail(where, value, f"a tuple of {len(args)} items")
            for k, (hint, item) in enumerate(zip(args, value, strict=True)):
                self.value(hint, item, inner, f"{where}[{k}]")
            return
        if args:
            for k, item in enumerate(value):
                self.value(args[0], item, inner, f"{where}[{k}]")

    def mapping(self, args, value, meta, where: str) -> None:
        if not isinstance(value, dict):
            self.fail(where, value, "a mapping")
        if args:
            for key, item in value.items():
                self.value(args[0], key, meta, f"{where} key {key!r}")
                self.value(args[1], item, {}, f"{where}[{key!r}]")

    def size(self, dim, where: str) -> int:
        if isinstance(dim, int):
            return dim
        if dim not in self.dims:
            raise TypeError(f"schema: {where} uses dimension {dim!r}, which has no size")
        return self.dims[dim]

    def shown(self, shape) -> str:
        parts = [f"{d}={self.dims[d]}" if isinstance(d, str) and d in self.dims else str(d)
                 for d in shape]
        return f"[{', '.join(parts)}]"

    @staticmethod
    def bad(value: torch.Tensor) -> str:
        flat = value.detach().reshape(-1).double()
        index = int(torch.nonzero(~torch.isfinite(flat) | (flat != flat))[0]) \
            if not bool(torch.isfinite(flat).all()) else int(torch.argmin(flat))
        return f"{float(flat[index])} at flat index {index}"
