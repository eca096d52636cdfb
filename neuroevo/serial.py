"""State files that cannot run code: JSON for the structure, safetensors for the tensors.

A checkpoint is a tree of dicts, lists, tuples, numbers, strings, tensors, numpy arrays and
a few known dataclasses (genomes, Adam's moments). ``encode`` turns it into strict JSON
plus a flat ``{name: tensor}`` dict; ``save`` writes both into one safetensors file (the
JSON as its metadata), so one atomic rename replaces the whole state. Loading parses JSON
and raw tensor bytes only: nothing is unpickled, and a dataclass is rebuilt only when its
name is on the caller's allow-list. A crafted or foreign file is a ``CheckpointError``.

>>> import torch
>>> doc, tensors = encode({"x": torch.ones(2), "t": (1, float("-inf"))})
>>> decode(doc, tensors, {})["t"]
(1, -inf)
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import torch

from neuroevo.errors import CheckpointError
from neuroevo.files import atomic_write, check_regular

_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode(tree) -> tuple[object, dict[str, torch.Tensor]]:
    """``(json_tree, tensors)``: ``tree`` with every tensor replaced by a reference."""
    tensors: dict[str, torch.Tensor] = {}

    def walk(x):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, (int, np.integer)):
            return int(x)
        if isinstance(x, (float, np.floating)):
            x = float(x)
            return x if math.isfinite(x) else {"$float": repr(x)}
        if isinstance(x, torch.Tensor):
            name = f"t{len(tensors)}"
            tensors[name] = x.detach().cpu().contiguous().clone()
            return {"$tensor": name}
        if isinstance(x, np.ndarray):
            name = f"t{len(tensors)}"
            tensors[name] = torch.from_numpy(np.ascontiguousarray(x).copy())
            return {"$ndarray": name}
        if isinstance(x, tuple):
            return {"$tuple": [walk(v) for v in x]}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in x):
                return {k: walk(v) for k, v in x.items()}
            return {"$items": [[walk(k), walk(v)] for k, v in x.items()]}
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {"$type": type(x).__name__,
                    "fields": {f.name: walk(getattr(x, f.name)) for f in dataclasses.fields(x)}}
        raise TypeError(f"cannot store a {type(x).__name__} in a checkpoint")

    return walk(tree), tensors


def decode(doc, tensors: dict[str, torch.Tensor], types: dict[str, type]):
    """The tree ``encode`` gave; ``types`` names the dataclasses that may be rebuilt."""

    def tensor(name):
        if name not in tensors:
            raise CheckpointError(f"tensor {name!r} is referenced but not stored")
        return tensors[name]

    def walk(x):
        if isinstance(x, list):
            return [walk(v) for v in x]
        if not isinstance(x, dict):
            return x
        if "$float" in x:
            if x["$float"] not in _FLOATS:
                raise CheckpointError(f"not a float: {x['$float']!r}")
            return _FLOATS[x["$float"]]
        if "$tensor" in x:
            return tensor(x["$tensor"])
        if "$ndarray" in x:
            return tensor(x["$ndarray"]).numpy()
        if "$tuple" in x:
            return tuple(walk(v) for v in x["$tuple"])
        if "$items" in x:
            return {_hashable(walk(k)): walk(v) for k, v in x["$items"]}
        if "$type" in x:
            cls = types.get(x["$type"])
            if cls is None:
                raise CheckpointError(f"type {x['$type']!r} is not one a checkpoint may hold")
            return cls(**{k: walk(v) for k, v in x["fields"].items()})
        return {k: walk(v) for k, v in x.items()}

    try:
        return walk(doc)
    except (TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"malformed state ({e})") from None


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def dumps(tree, meta: dict[str, str] | None = None) -> bytes:
    """``tree`` as the bytes of a safetensors file (its JSON under metadata ``state``)."""
    from safetensors.torch import save

    doc, tensors = encode(tree)
    metadata = {**(meta or {}), "state": json.dumps(doc, allow_nan=False)}
    return save(tensors, metadata=metadata)


def save_file(path: str, tree, meta: dict[str, str] | None = None) -> None:
    atomic_write(path, dumps(tree, meta))


def read_file(path: str, what: str = "neuroevo state file",
              fix: str = "restore it from a backup or start the run again"
              ) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """``(metadata, tensors)`` of a safetensors file; anything else (a corrupt file, a FIFO,
    a directory) is a one-line ``CheckpointError``: ``{path} is not a {what} (why); {fix}``."""
    from safetensors import SafetensorError, safe_open

    try:
        check_regular(path)
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            return meta, {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - not a dict
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path} is not a {what} ({first_line(e)}); {fix}") from None


def load_file(path: str, types: dict[str, type], fmt: str | None = None):
    """``(metadata, tree)`` that ``save_file`` wrote; ``fmt`` must match metadata ``format``."""
    meta, tensors = read_file(path)
    if fmt is not None and meta.get("format") != fmt:
        raise CheckpointError(f"{path} has format {meta.get('format')!r}, expected {fmt!r}; "
                              "it was not written by this version of neuroevo")
    try:
        doc = loads_strict(meta["state"])
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{path} holds no readable state ({first_line(e)})") from None
    return meta, decode(doc, tensors, types)


def loads_strict(text: str | bytes):
    """``json.loads`` that refuses ``NaN`` and ``Infinity`` (not JSON; neuroevo writes null)
    and nesting too deep to parse: a ``ValueError`` either way."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def _no_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def first_line(e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
