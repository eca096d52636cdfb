"""Observation statistics for ``ObsNorm`` (OpenAI-ES on MuJoCo), gathered layout-independently.

A training episode feeds the statistics when its seed is in the sample (``sampled``: a
function of the seed alone, paper: 1% of the episodes). Each member's sums are kept apart
(``add``) and merged in member order (``merge``), so the normaliser gets the same
sums whatever the slots, subsets, worker threads or Ray actors that ran the episodes.
"""

from __future__ import annotations

import numpy as np
import torch

from neuroevo.noise import mix64
from neuroevo.policy.obsnorm import ObsNorm


def sampled(seed: int, fraction: float) -> bool:
    """Whether the episode of ``seed`` is in the ``fraction`` sample (a function of the seed)."""
    return mix64(seed ^ 0x5DEECE66D) % (1 << 24) < fraction * (1 << 24)


def add(stats: dict[int, list], member: int, obs: np.ndarray) -> None:
    """Add one observation of a sampled episode to ``member``'s ``[sum, sumsq, count]``."""
    x = obs.astype(np.float64)
    acc = stats.setdefault(member, [0.0, 0.0, 0])
    acc[0], acc[1], acc[2] = acc[0] + x, acc[1] + x * x, acc[2] + 1


def merge(obs_norm: ObsNorm, stats: dict[int, list]) -> None:
    """Add per-member ``[sum, sumsq, count]`` to ``obs_norm`` in member order: the same sums
    whatever the layout, or the number of workers."""
    s, ssq, count = (sum(stats[m][i] for m in sorted(stats)) for i in range(3))
    obs_norm.increment(torch.from_numpy(s), torch.from_numpy(ssq), count)
