"""Parameter specs: how a flat genome ``[D]`` maps onto a module's named tensors.

A spec is built once from a module template; modules never own per-genome weights. The
flat order is ``module.named_parameters()`` order, so ``theta[spec[name].slice]`` viewed as
``spec[name].shape`` is that parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ParamEntry:
    name: str
    shape: tuple[int, ...]
    offset: int
    init_std: float  # std of the random initialisation (0: initialised to zero)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.numel)


class ParamSpec:
    """Names, shapes, offsets and init stds of a module's parameters, in flat order."""

    def __init__(self, entries: list[ParamEntry]):
        self.entries = entries
        self.num_params = sum(e.numel for e in entries)
        self._by_name = {e.name: e for e in entries}

    @classmethod
    def from_module(cls, module: nn.Module, init_std) -> ParamSpec:
        """``init_std(name, tensor) -> float`` gives each parameter's initialisation std."""
        entries, offset = [], 0
        for name, p in module.named_parameters():
            e = ParamEntry(name, tuple(p.shape), offset, float(init_std(name, p)))
            entries.append(e)
            offset += e.numel
        return cls(entries)

    def __getitem__(self, name: str) -> ParamEntry:
        return self._by_name[name]

    def __iter__(self):
        return iter(self.entries)

    def init_std(self) -> torch.Tensor:
        """``[D]`` per-parameter std: the GA's ``init_std`` for random networks of this shape."""
        return torch.cat([torch.full((e.numel,), e.init_std) for e in self.entries])

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``flat [..., D]`` as ``{name: [..., *shape]}`` (no copy)."""
        lead = flat.shape[:-1]
        return {e.name: flat[..., e.slice].view(*lead, *e.shape) for e in self.entries}
