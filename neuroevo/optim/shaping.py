"""Fitness validation and shaping: pure functions over a 1-D float array."""

from __future__ import annotations

import numpy as np

from neuroevo.errors import ConfigError

NONFINITE_POLICIES = ("raise", "worst")


def validate_fitness(fitness, expected: int, nonfinite: str = "raise") -> np.ndarray:
    """A float64 copy of ``fitness`` checked against the population, or ``ConfigError``.

    ``-inf`` is a legal (worst) score. NaN and ``+inf`` raise with ``nonfinite="raise"``
    (a NaN would otherwise sort anywhere and ``+inf`` would win selection); with
    ``nonfinite="worst"`` they become ``-inf``.
    """
    if hasattr(fitness, "detach"):  # a torch tensor, possibly on a GPU
        fitness = fitness.detach().cpu().numpy()
    f = np.array(fitness, dtype=np.float64)
    if f.shape not in ((expected,), (expected, 1)):
        raise ConfigError(f"fitness must have one value per population member ({expected}), "
                          f"got shape {f.shape}")
    f = f.reshape(-1)
    bad = np.isnan(f) | (f == np.inf)
    if bad.any():
        if nonfinite == "raise":
            i = int(np.flatnonzero(bad)[0])
            raise ConfigError(f"fitness must be finite or -inf, got {f[i]} at member {i} "
                              f"({int(bad.sum())} bad values); fix the evaluator or pass "
                              "nonfinite='worst' to score them as the worst")
        f[bad] = -np.inf
    return f


def ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks (0 = lowest); ties keep their order (stable), so results are reproducible."""
    r = np.empty(len(x), dtype=np.int64)
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r


def centered_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] as in Salimans et al. 2017 (``compute_centered_ranks``)."""
    if len(x) < 2:
        return np.zeros(len(x))
    return ranks(x) / (len(x) - 1) - 0.5


def top_k(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, best first; ties go to the lower index."""
    return np.argsort(-x, kind="stable")[:k]
