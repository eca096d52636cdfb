"""Novelty: the mean distance of a behaviour characterisation (BC) to its k nearest
neighbours in an archive of BCs seen so far (Lehman & Stanley 2011; Conti et al. 2018,
``novelty = (1/k) sum_j ||b - b_j||`` over the k nearest ``b_j`` of the archive, k = 10).

``novelty`` is batched: one ``torch.cdist`` per chunk of queries against the whole archive
(each distance computed on its own, not through a matrix product, so that it does not
depend on the chunk) and a ``topk``, no Python loop over the archive, in float64 on the
archive's device; its result does not depend on the chunking or on the order of ties.
Where the archive holds fewer than k points the mean is over all of them, as in the
authors' code (``es_distributed/nses.py``: ``argsort()[:k]``), so a search can start from
an archive of its first few BCs.
"""

from __future__ import annotations

import numpy as np
import torch

from neuroevo.errors import ConfigError, check_range
from neuroevo.metrics import Metric

CHUNK = 4096  # queries per distance matrix: 4096 x 100,000 float64 is 3.3 GB at most


def _check_k(k: int) -> None:
    check_range("k", k, isinstance(k, int) and not isinstance(k, bool) and k >= 1,
                "an integer >= 1 (the paper: 10)")


def distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[len(a), len(b)]`` Euclidean distances, each computed on its own: cdist's
    matrix-product path would make a distance depend on how many others it is computed with."""
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")


def _mean_nearest(table: torch.Tensor, nearest: int) -> torch.Tensor:
    return table.topk(nearest, dim=1, largest=False).values.mean(1)


def novelty(archive: torch.Tensor, bcs, k: int) -> np.ndarray:
    """``[Q]`` novelty of each of ``bcs`` (``[Q, d]``) against ``archive`` (``[n, d]``)."""
    _check_k(k)
    queries = torch.as_tensor(np.asarray(bcs), dtype=torch.float64, device=archive.device)
    if queries.ndim != 2 or queries.shape[1] != archive.shape[1]:
        raise ConfigError(f"behaviour characterisations of shape {list(queries.shape)} do not "
                          f"match the archive's {archive.shape[1]} dimensions")
    if len(archive) == 0:
        raise ConfigError("novelty needs an archive with at least one point")
    points = archive.to(torch.float64)
    nearest = min(k, len(points))
    out = [_mean_nearest(distances(chunk, points), nearest) for chunk in queries.split(CHUNK)]
    return torch.cat(out).cpu().numpy()


def population_novelty(archive: torch.Tensor | None, bcs, k: int) -> np.ndarray:
    """``[P]`` novelty of each member of a population against the archive and the other
    members (Lehman & Stanley 2011: the k nearest among the archive and the current
    population, the member itself left out)."""
    _check_k(k)
    members = torch.as_tensor(np.asarray(bcs), dtype=torch.float64)
    within = distances(members, members)
    within.fill_diagonal_(float("inf"))
    parts = [within] if archive is None else [
        distances(members, archive.to(torch.float64).cpu()), within]
    table = torch.cat(parts, dim=1)
    nearest = min(k, table.shape[1] - 1)  # the member itself is not a neighbour
    if nearest < 1:
        raise ConfigError("novelty needs at least two members or an archive")
    return _mean_nearest(table, nearest).numpy()


METRICS = (Metric("novelty_mean", "novelty search: the training members' mean novelty",
                  csv=True, board=True, live="nov {:>7.3g}"),
           Metric("archive_size", "novelty search: points in the novelty archive", csv=True,
                  board=True, live="archive {:>5}"))


def append(archive: torch.Tensor, bcs) -> torch.Tensor:
    """``archive`` with ``bcs`` (``[m, d]``) added at the end (a new tensor)."""
    new = torch.as_tensor(np.asarray(bcs), dtype=archive.dtype).reshape(-1, archive.shape[1])
    return torch.cat([archive, new.to(archive.device)])
