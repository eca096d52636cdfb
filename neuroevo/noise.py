"""The shared noise table: one source of Gaussian noise, identical on every device and machine.

Every mutation (GA) and perturbation (ES) is a slice ``table[k : k + D]`` whose offset ``k``
is derived from an integer seed, so a genome or a message only needs the seed (Salimans et
al. 2017, Such et al. 2017). The table is built on the CPU from a fixed numpy PCG64 stream,
whose output numpy keeps identical across platforms, and copied as is to other devices.
"""

from __future__ import annotations

import threading
from typing import ClassVar

import numpy as np
import torch

from neuroevo.errors import check_range

DEFAULT_SEED = 123
_MASK64 = (1 << 64) - 1


def default_size(num_params: int) -> int:
    """Entries for a table serving ``num_params``-dim genomes: 32M (128 MB) or 8 x D if larger."""
    return max(1 << 25, 8 * num_params)


_GAMMA, _M1, _M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # SplitMix64


def mix64(x: int) -> int:
    """SplitMix64 finaliser: spreads consecutive seeds over the whole table."""
    x = (x + _GAMMA) & _MASK64
    x = ((x ^ (x >> 30)) * _M1) & _MASK64
    x = ((x ^ (x >> 27)) * _M2) & _MASK64
    return x ^ (x >> 31)


def mix64_array(x: np.ndarray) -> np.ndarray:
    """``mix64`` over a uint64 array (uint64 arithmetic wraps: no masks)."""
    u = np.uint64
    x = x + u(_GAMMA)
    x = (x ^ (x >> u(30))) * u(_M1)
    x = (x ^ (x >> u(27))) * u(_M2)
    return x ^ (x >> u(31))


def signed64(c: int) -> int:
    """The int64 with the bits of the uint64 ``c``."""
    return c - (1 << 64) if c >= 1 << 63 else c


def shift_right(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's ``>>`` on int64 is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def mix64_tensor(x: torch.Tensor) -> torch.Tensor:
    """``mix64`` over an int64 tensor on any device: the bits of ``mix64_array``'s uint64s
    (int64 products wrap as uint64 ones do; torch lacks uint64 arithmetic on a GPU)."""
    x = x + signed64(_GAMMA)
    x = (x ^ shift_right(x, 30)) * signed64(_M1)
    x = (x ^ shift_right(x, 27)) * signed64(_M2)
    return x ^ shift_right(x, 31)


class NoiseTable:
    """``size`` float32 standard normals from ``seed``; ``slice(seed, D)`` is a view, not a copy.

    >>> t = NoiseTable(seed=0, size=1000)
    >>> t.slice(42, 10).shape
    torch.Size([10])
    """

    _shared: ClassVar[dict[tuple[int, int], NoiseTable]] = {}
    _lock = threading.Lock()

    def __init__(self, seed: int = DEFAULT_SEED, size: int = 1 << 25):
        check_range("noise size", size, isinstance(size, int) and size >= 1, "a positive integer")
        self.seed, self.size = int(seed), int(size)
        rng = np.random.Generator(np.random.PCG64(self.seed))
        self._cpu = torch.from_numpy(rng.standard_normal(self.size, dtype=np.float32))
        self._copies: dict[torch.device, torch.Tensor] = {torch.device("cpu"): self._cpu}

    @classmethod
    def shared(cls, seed: int = DEFAULT_SEED, size: int = 1 << 25) -> NoiseTable:
        """One table per (seed, size) per process: optimizers and evaluators share its memory."""
        with cls._lock:
            key = (int(seed), int(size))
            if key not in cls._shared:
                cls._shared[key] = cls(*key)
            return cls._shared[key]

    @property
    def spec(self) -> dict:
        """What a genome needs to name its noise source: ``{"seed": ..., "size": ...}``."""
        return {"seed": self.seed, "size": self.size}

    def offset(self, seed: int, length: int) -> int:
        """Start of the slice that ``seed`` names for a ``length``-dim genome."""
        check_range("genome length", length, 1 <= length <= self.size,
                    f"between 1 and the noise table size {self.size} (use a larger table)")
        return mix64(int(seed)) % (self.size - length + 1)

    def table(self, device: torch.device | str | None = None) -> torch.Tensor:
        """The whole table on ``device`` (copied once, then cached)."""
        device = torch.device(device or "cpu")
        if device not in self._copies:
            with self._lock:
                if device not in self._copies:
                    self._copies[device] = self._cpu.to(device)
        return self._copies[device]

    def slice(self, seed: int, length: int, device=None) -> torch.Tensor:
        """``[length]`` float32 view of the table at the offset that ``seed`` names."""
        k = self.offset(seed, length)
        return self.table(device)[k : k + length]
