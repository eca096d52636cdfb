"""Centroidal Voronoi tessellations for CVT-MAP-Elites (Vassiliades, Chatzilygeroudis &
Mouret 2018, "Using Centroidal Voronoi Tessellations to Scale Up the Multidimensional
Archive of Phenotypic Elites Algorithm", IEEE TEVC; arXiv 1610.05729).

As the authors' ``pymap_elites`` (``map_elites/common.py: cvt``) and QDax's
``compute_cvt_centroids`` do: ``samples`` points drawn uniformly in the behaviour box, then
k-means with k-means++ seeding and one initialisation. Where we differ: plain k-means++ (one
candidate per draw, not scikit-learn's greedy variant) and Lloyd's iterations in float64
until no centroid moves by more than 1e-4 of the box's scale, at most 300 (scikit-learn's
cap), from a fixed generator, so that every run with the same cells, bounds and samples
shares one tessellation whatever its seed, and the coverage of runs compares.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from neuroevo.optim.novelty import distances

MAX_ITER = 300
CHUNK = 8192  # sample rows per distance block: 8,192 x 1,000 float64 is 64 MB
STREAM = 0x43565400  # the generator's fixed seed: the tessellation is not the run's seed's


def nearest(points: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """``[N]`` index of each point's nearest centroid (a tie: the lower index)."""
    return torch.cat([distances(block, centroids).argmin(dim=1)
                      for block in points.split(CHUNK)])


def centroids(low, high, cells: int, samples: int) -> torch.Tensor:
    """``[cells, d]`` float64 centroids of a CVT of the box ``[low, high]`` (a copy)."""
    return _centroids(tuple(map(float, low)), tuple(map(float, high)), cells, samples).clone()


@functools.lru_cache(maxsize=8)  # a run, its resume check and play build it once a process
def _centroids(low, high, cells: int, samples: int) -> torch.Tensor:
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    rng = np.random.default_rng([STREAM, cells, samples])
    x = torch.from_numpy(low + (high - low) * rng.random((samples, len(low))))
    c = _seed(x, cells, rng)
    tol = 1e-4 * float(np.max(high - low))
    for _ in range(MAX_ITER):
        owner = nearest(x, c)
        sums = torch.zeros_like(c).index_add_(0, owner, x)
        counts = torch.bincount(owner, minlength=cells).unsqueeze(1)
        moved = torch.where(counts > 0, sums / counts.clamp(min=1), c)  # empty: stays
        shift = float((moved - c).norm(dim=1).max())
        c = moved
        if shift <= tol:
            break
    return c


def _seed(x: torch.Tensor, cells: int, rng: np.random.Generator) -> torch.Tensor:
    """k-means++ (Arthur & Vassilvitskii 2007): each next centre drawn with probability
    proportional to the squared distance to the nearest chosen one."""
    chosen = [int(rng.integers(len(x)))]
    d2 = distances(x, x[chosen[0]:chosen[0] + 1]).squeeze(1) ** 2
    for _ in range(cells - 1):
        p = d2.numpy() / float(d2.sum())
        pick = int(rng.choice(len(x), p=p))
        chosen.append(pick)
        d2 = torch.minimum(d2, distances(x, x[pick:pick + 1]).squeeze(1) ** 2)
    return x[chosen].clone()
