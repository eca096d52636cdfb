"""MAP-Elites: Mouret & Clune 2015, "Illuminating search spaces by mapping elites" (arXiv
1504.04909), over a grid of a behaviour characterisation (BC), on seed-chain genomes; with
``cvt_cells`` > 0, CVT-MAP-Elites (Vassiliades et al. 2018, ``neuroevo/optim/cvt.py``).

The archive is a grid of ``bins`` cells per BC dimension between ``grid_low`` and
``grid_high`` (a BC outside is put in the nearest edge cell), or the ``cvt_cells`` regions
of a centroidal Voronoi tessellation of that box (a BC goes to its nearest centroid, inside
the box or not; the centroids are in the state, so a resumed run checks them). Each cell
keeps the best member found there: its genome (a seed chain, a few KB, so the archive is
small and Ray's messages stay seeds), its fitness and its BC. The first generation is
``population`` random networks (the GA's initialisation); every later one is
``population`` children, each of a parent drawn uniformly from the filled cells, mutated
as the Deep GA mutates (``parent + sigma * eps``). After a generation is evaluated, each
member in turn takes its cell if the cell is empty or holds a lower fitness (the paper's
insertion rule; members of one generation in index order, so a tie keeps the earlier one).

Metrics: ``coverage``, the share of cells filled; ``qd_score``, the sum over filled cells
of ``fitness - qd_offset`` (QDax's QD-score with its offset: set ``qd_offset`` to a fitness
below any the task gives, so that every filled cell adds). A run deploys and tests the
best cell's member; ``neuroevo play --member`` plays any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import CheckpointError, ConfigError, check_range
from neuroevo.genomes import SEED_BOUND, ChainDecoder, Population, SeedChain
from neuroevo.metrics import Metric
from neuroevo.noise import NoiseTable
from neuroevo.optim import cvt
from neuroevo.optim.base import Optimizer
from neuroevo.optim.registry import Algorithm, Params, Start, at_least, param
from neuroevo.schema import integer, real, tensor


@dataclass
class MapElitesState:
    cells: dict[int, SeedChain] = field(default_factory=dict, metadata=integer(0, "cells"))
    # cell index -> the member's SeedChain
    fitness: torch.Tensor | None = field(default=None, metadata=tensor(
        ("cells",), torch.float64, "finite_or_-inf"))  # -inf where empty
    bcs: torch.Tensor | None = field(default=None, metadata=tensor(
        ("cells", "d"), torch.float64))  # the BC of each cell's member
    centroids: torch.Tensor | None = field(default=None, metadata=tensor(
        ("cells", "d"), torch.float64))  # CVT-MAP-Elites' regions
    generation: int = field(default=0, metadata=integer(0))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))


def parse_bounds(text: str, key: str) -> tuple[float, ...]:
    """``"0,0"`` -> ``(0.0, 0.0)``, or a one-line error naming ``algo.KEY``."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(np.isfinite(values)):
        raise ConfigError(f"algo.{key} must be finite numbers separated by commas, one per "
                          f"behaviour dimension (e.g. 0,0), got {text!r}")
    return values


class MapElites(Optimizer):
    """MAP-Elites on a grid (module docstring). ``grid_low``, ``grid_high``: the grid's
    bounds per BC dimension; ``bins``: cells per dimension; ``cvt_cells``: 0 for the grid, or
    the regions of a CVT of the box drawn from ``cvt_samples`` points; ``sigma``: the
    mutation power; ``init_std``: the initial networks' std (a float or a ``[D]`` tensor, as
    the GA's)."""

    name = "mapelites"
    uses_behaviour = True
    metrics = (Metric("coverage", "MAP-Elites: the share of the grid's cells filled", csv=True,
                      board=True, live="cover {:>5.1%}"),
               Metric("qd_score", "MAP-Elites: the sum over filled cells of fitness minus "
                      "qd_offset", csv=True, board=True, live="QD {:>9.4g}"),
               Metric("cells_filled", "MAP-Elites: cells holding a member", csv=True))
    state_types = (SeedChain,)

    def __init__(self, num_params: int, *, grid_low, grid_high, bins: int = 20,
                 cvt_cells: int = 0, cvt_samples: int = 25000, sigma: float = 0.01,
                 init_std=1.0, qd_offset: float = 0.0,
                 population_size: int = 100, seed: int = 0, noise: NoiseTable | None = None,
                 nonfinite: str = "raise"):
        super().__init__(num_params, population_size, seed, noise, nonfinite)
        self.low = np.asarray(grid_low, dtype=np.float64)
        self.high = np.asarray(grid_high, dtype=np.float64)
        check_range("grid_high", tuple(self.high), self.low.shape == self.high.shape and
                    self.low.ndim == 1 and bool((self.high > self.low).all()),
                    f"above grid_low {tuple(self.low)} in every dimension")
        check_range("bins", bins, isinstance(bins, int) and bins >= 1, ">= 1")
        check_range("sigma", sigma, sigma > 0, "> 0")
        check_range("cvt_cells", cvt_cells, isinstance(cvt_cells, int) and cvt_cells >= 0,
                    ">= 0")
        check_range("cvt_samples", cvt_samples, cvt_samples >= cvt_cells,
                    f">= cvt_cells ({cvt_cells})")
        self.bins, self.sigma, self.qd_offset = bins, float(sigma), float(qd_offset)
        self.num_cells = cvt_cells or bins ** len(self.low)
        self.init_std = torch.as_tensor(init_std, dtype=torch.float32)
        self.state = MapElitesState(
            centroids=cvt.centroids(self.low, self.high, cvt_cells, cvt_samples)
            if cvt_cells else None)
        self._decoders: dict[torch.device, ChainDecoder] = {}

    def decoder(self, device=None) -> ChainDecoder:
        device = torch.device(device or "cpu")
        if device not in self._decoders:
            self._decoders[device] = ChainDecoder(self.noise, self.num_params, None,
                                                  self.init_std, 2 * self.population_size,
                                                  device)
        return self._decoders[device]

    def cell_of(self, bcs: np.ndarray) -> np.ndarray:
        """``[P]`` cell of each BC: the grid's (row-major over the dimensions), or the CVT's
        nearest centroid."""
        self.expect_behaviour(bcs.shape[1])
        if self.state.centroids is not None:
            points = torch.as_tensor(bcs, dtype=torch.float64)
            return cvt.nearest(points, self.state.centroids).numpy()
        scaled = (bcs - self.low) / (self.high - self.low) * self.bins
        index = np.clip(np.floor(scaled), 0, self.bins - 1).astype(np.int64)
        return np.ravel_multi_index(index.T, (self.bins,) * len(self.low))

    def _ask(self) -> Population:
        s, rng = self.state, self.rng()
        seeds = rng.integers(0, SEED_BOUND, self.population_size)
        if not s.cells:
            genomes = [SeedChain(int(q)) for q in seeds]
        else:
            filled = sorted(s.cells)
            parents = rng.integers(0, len(filled), self.population_size)
            genomes = [s.cells[filled[p]].mutate(int(q), self.sigma)
                       for p, q in zip(parents, seeds, strict=True)]
        return Population(genomes, s.generation, "train", self.decoder)

    def _tell_behaviour(self, pop: Population, fitness: np.ndarray, behaviour: np.ndarray
                        ) -> tuple[dict, bool]:
        s = self.state
        cells = self.cell_of(behaviour)
        if s.fitness is None:
            s.fitness = torch.full((self.num_cells,), float("-inf"), dtype=torch.float64)
            s.bcs = torch.zeros((self.num_cells, behaviour.shape[1]), dtype=torch.float64)
        for member, cell in enumerate(cells):
            if fitness[member] > s.fitness[cell]:
                s.cells[int(cell)] = pop[member]
                s.fitness[cell] = float(fitness[member])
                s.bcs[cell] = torch.as_tensor(behaviour[member])
        filled = torch.isfinite(s.fitness)
        return {"coverage": float(filled.double().mean()),
                "qd_score": float((s.fitness[filled] - self.qd_offset).sum()),
                "cells_filled": int(filled.sum())}, True

    def state_dims(self) -> dict[str, int | None]:
        return {**super().state_dims(), "cells": self.num_cells, "d": len(self.low)}

    def expect_behaviour(self, dims: int | None) -> None:
        if dims is not None and dims != len(self.low):
            raise ConfigError(f"the behaviour has {dims} dimensions but the grid {len(self.low)} "
                              f"(algo.grid_low={','.join(f'{v:g}' for v in self.low)}); give "
                              f"algo.grid_low and algo.grid_high {dims} bounds each")
        super().expect_behaviour(dims)

    def _check_layout(self, values: dict) -> None:
        """The archive's cells are this run's: its grid, or its CVT's centroids."""
        mine, theirs, fitness = self.state.centroids, values.get("centroids"), values.get("fitness")
        same = ((mine is None) == (theirs is None) and
                (mine is None or (isinstance(theirs, torch.Tensor) and mine.shape == theirs.shape
                                  and torch.equal(mine, theirs))) and
                (not isinstance(fitness, torch.Tensor) or fitness.ndim != 1 or
                 len(fitness) == self.num_cells))
        if not same:
            raise CheckpointError(
                f"the checkpoint's MAP-Elites archive has other cells than this run's "
                f"({self.num_cells} {'CVT regions' if mine is not None else 'grid cells'}); "
                "resume with the algo.bins, algo.cvt_cells, algo.cvt_samples and grid bounds "
                "the run was started with")

    def _check_state(self, state: MapElitesState) -> None:
        """The cells holding a member are those of finite fitness."""
        if (state.fitness is None) != (state.bcs is None):
            raise CheckpointError("optimizer state.fitness and state.bcs must both be set or "
                                  "both be None")
        filled = set() if state.fitness is None else set(
            torch.nonzero(torch.isfinite(state.fitness)).reshape(-1).tolist())
        if set(state.cells) != filled:
            odd = sorted(set(state.cells) ^ filled)[0]
            raise CheckpointError(f"optimizer state.cells and state.fitness disagree at cell "
                                  f"{odd}: a cell holds a member exactly where its fitness is "
                                  "finite")

    def _best(self) -> SeedChain | None:
        if not self.state.cells:
            return None
        return self.state.cells[int(torch.argmax(self.state.fitness))]

    @property
    def elite(self) -> SeedChain | None:
        """The best cell's member: what a run deploys (``elite.json``)."""
        return self._best()

    @property
    def elite_score(self) -> float:
        return float("-inf") if self.state.fitness is None else float(self.state.fitness.max())

    def deployed_params(self) -> torch.Tensor | None:
        best = self._best()
        return None if best is None else self.decoder().decode(best)

    def best_params(self) -> torch.Tensor | None:
        return self.deployed_params()

    def member_params(self, cell: int) -> torch.Tensor:
        """``[D]`` parameters of the member in grid cell ``cell``."""
        if cell not in self.state.cells:
            filled = sorted(self.state.cells)
            raise ConfigError(f"cell {cell} of the MAP-Elites grid is empty; filled cells: "
                              f"{filled[:10]}{' ...' if len(filled) > 10 else ''}")
        return self.decoder().decode(self.state.cells[cell])

    def test_population(self, episodes: int) -> Population | None:
        best = self._best()
        if best is None:
            return None
        return Population([best] * episodes, max(self.state.generation - 1, 0), "test",
                          self.decoder, budgeted=False)


@dataclass(frozen=True)
class MapElitesParams(Params):
    grid_low: str = param("", "finite numbers, one per behaviour dimension, e.g. 0,0",
                          lambda v: v != "")  # the grid's lower bounds
    grid_high: str = param("", "finite numbers above grid_low, e.g. 200,200",
                           lambda v: v != "")  # the grid's upper bounds
    bins: int = param(20, ">= 1", at_least(1))  # cells per behaviour dimension (the grid)
    cvt_cells: int = param(0, ">= 0", at_least(0))  # > 0: CVT-MAP-Elites with this many
    # regions in place of the grid (Vassiliades et al. 2018)
    cvt_samples: int = param(25000, ">= 1", at_least(1))  # uniform points the CVT's k-means
    # runs on (pymap_elites' default)
    sigma: float = param(0.01, "> 0", lambda v: v > 0)  # mutation power
    qd_offset: float = param(0.0, "a number", lambda v: np.isfinite(v))  # QD-score: what is
    # subtracted from each filled cell's fitness (below any fitness the task gives)

    def problems(self) -> list[str]:
        out = super().problems()
        if out:
            return out
        try:
            low = parse_bounds(self.grid_low, "grid_low")
            high = parse_bounds(self.grid_high, "grid_high")
        except ConfigError as e:
            return [str(e)]
        if len(low) != len(high) or not all(h > lo for lo, h in zip(low, high, strict=True)):
            return [f"algo.grid_high must be above algo.grid_low in every dimension, got "
                    f"grid_low {self.grid_low} and grid_high {self.grid_high}"]
        if self.cvt_samples < self.cvt_cells:
            return [f"algo.cvt_samples must be at least algo.cvt_cells ({self.cvt_cells}), "
                    f"got {self.cvt_samples}"]
        return []


def from_config(p: MapElitesParams, start: Start) -> MapElites:
    return MapElites(start.num_params, grid_low=parse_bounds(p.grid_low, "grid_low"),
                     grid_high=parse_bounds(p.grid_high, "grid_high"), bins=p.bins,
                     cvt_cells=p.cvt_cells, cvt_samples=p.cvt_samples, sigma=p.sigma,
                     init_std=start.init_std, qd_offset=p.qd_offset,
                     population_size=start.population, seed=start.seed)


ALGORITHM = Algorithm(MapElites, MapElitesParams, from_config, pbt=("sigma",),
                      doc="MAP-Elites (Mouret & Clune 2015): a grid (or a CVT) of elites over a "
                      "behaviour")
