"""Low-rank perturbations of a parameter layout, as EGGROLL (Sarkar et al. 2025, "Evolution
Strategies at the Hyperscale", arXiv 2511.16652; its JAX code, ``noiser/eggroll.py``).

A perturbation named by a seed is, block by block of the flat ``[D]`` parameters:

- a block of two or more dims (a dense ``[out, in]`` or a conv ``[out, in, kh, kw]`` kernel,
  taken as ``[out, in*kh*kw]``): ``A @ B.T / sqrt(r)``, with ``A [out, r]`` and
  ``B [inner, r]`` read from the noise table at an offset derived from the seed and the
  block's index;
- a 1-D block (a bias): full-rank noise of its size, from its own offset.

So a member is still a seed (ES: ``(seed, sign)``; GA: a mutation ``(seed, sigma)``), and a
population's perturbations of one matrix stack into one ``[out, N*r] @ [N*r, inner]``
product (``weighted_sum``), never through N full matrices. ``vector`` materialises one
perturbation exactly: the reference every fast path is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from neuroevo.errors import ConfigError, check_range
from neuroevo.noise import NoiseTable, mix64
from neuroevo.threads import torch_threads


@dataclass(frozen=True)
class Block:
    """One parameter block of the flat layout: ``[start, start + size)``."""

    index: int
    start: int
    shape: tuple[int, ...]
    rank: int  # 0: a 1-D block, full-rank noise

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def out(self) -> int:
        return self.shape[0]

    @property
    def inner(self) -> int:
        return self.size // self.shape[0]

    @property
    def length(self) -> int:
        """Noise floats the block reads: ``(out + inner) * r``, or its size."""
        return (self.out + self.inner) * self.rank if self.rank else self.size


class LowRank:
    """Rank-``rank`` perturbations of parameters laid out as ``shapes`` (flat order).

    >>> lr = LowRank([(4, 3), (4,)], rank=1)
    >>> lr.vector(NoiseTable(size=1000), seed=7).shape
    torch.Size([16])
    """

    def __init__(self, shapes: Sequence[Sequence[int]], rank: int, num_params: int | None = None):
        check_range("rank", rank, isinstance(rank, int) and rank >= 1,
                    "an integer >= 1 (0 is full rank: no LowRank)")
        blocks, start = [], 0
        for k, shape in enumerate(shapes):
            shape = tuple(int(n) for n in shape)
            if not shape or any(n < 1 for n in shape):
                raise ConfigError(f"shapes[{k}] = {shape} is not a parameter block's shape; "
                                  "give each block's shape, such as (out, in) or (out,)")
            block = Block(k, start, shape, rank if len(shape) >= 2 else 0)
            if block.rank and rank > min(block.out, block.inner):
                raise ConfigError(f"rank {rank} is larger than block {k}'s smaller side "
                                  f"({shape} as [{block.out}, {block.inner}]); use a rank <= "
                                  f"{min(block.out, block.inner)}")
            blocks.append(block)
            start += block.size
        if num_params is not None and start != num_params:
            raise ConfigError(f"shapes hold {start:,} parameters but there are {num_params:,};"
                              " give the shapes of every parameter block in flat order")
        self.blocks, self.rank, self.num_params = tuple(blocks), rank, start
        self.scale = 1.0 / math.sqrt(rank)

    def offsets(self, noise: NoiseTable, seed: int) -> list[int]:
        """Where each block's noise starts in the table, for the perturbation ``seed``."""
        h = mix64(int(seed))
        return [noise.offset(mix64(h ^ (b.index + 1)), b.length) for b in self.blocks]

    def factors(self, noise: NoiseTable, seed: int, device=None) -> list[tuple[torch.Tensor, ...]]:
        """Per block, views of the table: ``(A [out, r], B [inner, r])``, or ``(v [size],)``."""
        table = noise.table(device)
        out = []
        for b, k in zip(self.blocks, self.offsets(noise, seed), strict=True):
            if b.rank:
                a = table[k:k + b.out * b.rank].view(b.out, b.rank)
                out.append((a, table[k + b.out * b.rank:k + b.length].view(b.inner, b.rank)))
            else:
                out.append((table[k:k + b.size],))
        return out

    def vector(self, noise: NoiseTable, seed: int, device=None) -> torch.Tensor:
        """``[D]`` float32: the perturbation ``seed``, materialised (matrix blocks
        ``A @ B.T / sqrt(r)``)."""
        parts = []
        with torch_threads(1):  # a multithreaded GEMM may split its sums by thread count
            for b, f in zip(self.blocks, self.factors(noise, seed, device), strict=True):
                parts.append((f[0] @ f[1].T * self.scale).reshape(-1) if b.rank else f[0])
        return torch.cat(parts)

    def weighted_sum(self, noise: NoiseTable, seeds: Sequence[int], weights: Sequence[float],
                     device=None) -> torch.Tensor:
        """``sum_i weights[i] * vector(seeds[i])`` as ``[D]`` float32: per matrix block one
        product of the stacked factors, ``[out, N*r] @ [N*r, inner]`` (each ``A_i`` scaled by
        its weight); per 1-D block a product of the stacked noise with the weights."""
        w = torch.as_tensor(list(weights), dtype=torch.float32, device=device)
        per_member = [self.factors(noise, s, device) for s in seeds]
        parts = []
        with torch_threads(1):
            for j, b in enumerate(self.blocks):
                if b.rank:
                    a = torch.cat([f[j][0] * w[i] for i, f in enumerate(per_member)], 1)
                    bt = torch.cat([f[j][1] for f in per_member], 1)
                    parts.append((a @ bt.T * self.scale).reshape(-1))
                else:
                    parts.append(w @ torch.stack([f[j][0] for f in per_member]))
        return torch.cat(parts)
