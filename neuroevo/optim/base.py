"""The base class owns the generation; an algorithm writes ``_ask`` and ``_tell`` only.

Every optimizer maximises. Randomness is counter-based: a generation's draws come from
``numpy.random.default_rng([seed, generation, phase])``, so the state is a handful of
counters and genomes, and a run resumed from ``state_dict()`` asks exactly what an
uninterrupted run would.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from neuroevo import schema
from neuroevo.errors import CheckpointError, ConfigError, StateError, check_range
from neuroevo.genomes import PHASES, SEED_BOUND, Perturbation, PerturbationDecoder, Population
from neuroevo.lowrank import LowRank
from neuroevo.metrics import Metric
from neuroevo.noise import NoiseTable, default_size
from neuroevo.optim.registry import Params, at_least, param
from neuroevo.optim.shaping import NONFINITE_POLICIES, validate_fitness


def validate_behaviour(behaviour, members: int, who: str) -> np.ndarray:
    """``[members, d]`` finite float64 behaviour characterisations, or a one-line error."""
    if behaviour is None:
        raise StateError(f"{who}.tell() needs behaviour=, the members' behaviour "
                         "characterisations (EpisodeBatch.extras['bc'])")
    b = np.asarray(behaviour, dtype=np.float64)
    if b.ndim != 2 or b.shape[0] != members or b.shape[1] < 1:
        raise ConfigError(f"behaviour must have shape [{members}, d], one vector per member; "
                          f"got {list(b.shape)}")
    if not np.isfinite(b).all():
        bad = int(np.flatnonzero(~np.isfinite(b).all(axis=1))[0])
        raise ConfigError(f"member {bad}'s behaviour characterisation is not finite: "
                          f"{b[bad].tolist()}")
    return b


def antithetic_pairs(rng: np.random.Generator, population_size: int) -> list[Perturbation]:
    """Antithetic pairs ``+/- eps(seed)``, adjacent, one seed per pair drawn from ``rng`` (so
    a worker ships one int)."""
    seeds = rng.integers(0, SEED_BOUND, population_size // 2)
    return [Perturbation(int(k), sign) for k in seeds for sign in (1, -1)]


def resolve_dims(num_params, center) -> tuple[int, torch.Tensor | None]:
    """``(D, center)`` from ``num_params=D`` or an initial parameter tensor, checked to agree."""
    if center is not None:
        center = torch.as_tensor(center, dtype=torch.float32).detach().clone().reshape(-1)
        check_range("center", tuple(center.shape), center.numel() >= 1 and
                    bool(torch.isfinite(center).all()), "a non-empty finite parameter tensor")
        check_range("num_params", num_params, num_params in (None, center.numel()),
                    f"None or center.numel() = {center.numel()}")
        return center.numel(), center
    check_range("num_params", num_params, isinstance(num_params, int) and num_params >= 1,
                "a positive integer (or pass an initial parameter tensor as center=)")
    return num_params, None


def low_rank(rank: int, shapes, num_params: int) -> LowRank | None:
    """The ``LowRank`` layout for ``rank`` (0: full rank, None) over ``shapes``, checked."""
    check_range("rank", rank, isinstance(rank, int) and rank >= 0,
                "an integer >= 0 (0: full rank)")
    if rank == 0:
        return None
    if shapes is None:
        raise ConfigError("rank > 0 needs shapes=, the parameter blocks' shapes in flat order "
                          "(a policy's: [e.shape for e in policy.spec])")
    return LowRank(shapes, rank, num_params)


class Optimizer:
    """Ask/tell skeleton shared by every algorithm.

    Subclasses define ``name``, set ``self.state`` (a dataclass: what evolves) and implement
    ``_ask() -> Population`` and ``_tell(pop, fitness) -> (metrics, generation_done)``.
    """

    name = "optimizer"
    deploys = "elite"  # what a run deploys, tests and exports: "elite" (a member) or "centre"
    metrics: tuple[Metric, ...] = ()  # the keys ``tell`` reports for a generation's row
    state_types: tuple[type, ...] = ()  # classes in ``state_dict()`` (the checkpoint loader)
    center_episodes = 0  # episodes of ``center_population()`` per generation (logging only)
    uses_behaviour = False  # ``tell`` reads each episode's behaviour characterisation
    behaviour_dims: int | None = None  # their dimensions, where the run knows them

    def __init__(self, num_params: int, population_size: int, seed: int, noise: NoiseTable | None,
                 nonfinite: str):
        check_range("population_size", population_size,
                    isinstance(population_size, int) and population_size >= 1,
                    "a positive integer")
        check_range("seed", seed, isinstance(seed, int) and seed >= 0, "a non-negative integer")
        check_range("nonfinite", nonfinite, nonfinite in NONFINITE_POLICIES,
                    f"one of {NONFINITE_POLICIES}")
        self.num_params, self.population_size, self.seed = num_params, population_size, seed
        self.noise = noise or NoiseTable.shared(size=default_size(num_params))
        check_range("noise table size", self.noise.size, self.noise.size >= num_params,
                    f">= num_params ({num_params}); build a larger NoiseTable")
        self.nonfinite = nonfinite
        self.lowrank: LowRank | None = None  # set by algorithms with a rank= option
        self._pending: Population | None = None

    @property
    def rank(self) -> int:
        """The perturbations' rank per matrix (0: full rank)."""
        return self.lowrank.rank if self.lowrank is not None else 0

    # -- what subclasses provide -------------------------------------------------------
    def _ask(self) -> Population:
        raise NotImplementedError

    def _tell(self, pop: Population, fitness: np.ndarray) -> tuple[dict, bool]:
        raise NotImplementedError

    def _tell_behaviour(self, pop: Population, fitness: np.ndarray, behaviour: np.ndarray
                        ) -> tuple[dict, bool]:
        """``_tell`` of an algorithm that reads behaviour (``uses_behaviour``)."""
        raise NotImplementedError

    def test_population(self, episodes: int) -> Population | None:
        """``episodes`` copies of what the run would deploy now (GA/RS: the elite; ES: the
        centre) for the papers' test score: phase ``"test"`` of the last finished
        generation, outside the budget; None while there is none. Changes no state."""
        raise NotImplementedError

    def deployed_params(self) -> torch.Tensor | None:
        """``[D]`` parameters of what the run deploys now (``deploys``); None before the
        first generation ends."""
        raise NotImplementedError

    def best_params(self) -> torch.Tensor | None:
        """``[D]`` parameters of the member with the best single training episode, for an
        algorithm that keeps it (the elite deployers); None while there is none."""
        return None

    def center_population(self) -> Population | None:
        """Copies of the current centre for the row's ``center_score`` (ES), as phase
        ``"validate"`` of the last finished generation, outside the budget; None: no centre
        to score. Changes no state."""
        return None

    # -- the generation ----------------------------------------------------------------
    def rng(self, phase: str = "train") -> np.random.Generator:
        """This generation's random stream; the same counters always give the same draws."""
        return np.random.default_rng([self.seed, self.state.generation, PHASES.index(phase)])

    def ask(self) -> Population:
        """The population to evaluate next; asking again before ``tell`` returns the same one."""
        if self._pending is None:
            self._pending = self._ask()
        return self._pending

    def tell(self, fitness, behaviour=None) -> dict:
        """Score the last ``ask()`` (one float per member, higher is better); return metrics.
        ``behaviour``: ``[P, d]`` the members' behaviour characterisations, which an
        algorithm with ``uses_behaviour`` needs (others ignore it)."""
        if self._pending is None:
            raise StateError(f"{type(self).__name__}.tell() called without a pending ask(); "
                             "call ask() first")
        pop = self._pending
        f = validate_fitness(fitness, len(pop), self.nonfinite)  # before any state changes
        if self.uses_behaviour:
            behaviour = validate_behaviour(behaviour, len(pop), type(self).__name__)
        finite = f[np.isfinite(f)]
        metrics = {"generation": self.state.generation, "phase": pop.phase,
                   "episodes": len(f),
                   "fitness_max": float(f.max()),
                   "fitness_mean": float(finite.mean()) if finite.size else float("-inf"),
                   "fitness_min": float(f.min())}
        if pop.phase == "train":
            self.state.best_fitness = max(self.state.best_fitness, metrics["fitness_max"])
        more, done = (self._tell_behaviour(pop, f, behaviour) if self.uses_behaviour
                      else self._tell(pop, f))
        metrics.update(more, best_fitness=self.state.best_fitness, generation_done=done)
        if done:
            self.state.generation += 1
        self._pending = None
        return metrics

    # -- checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything needed to continue bit for bit (a deep copy; tensors on the CPU)."""
        return {"algorithm": self.name, "num_params": self.num_params,
                "noise": self.noise.spec, "rank": self.rank,
                "state": copy.deepcopy({f.name: getattr(self.state, f.name)
                                        for f in dataclasses.fields(self.state)})}

    def check_header(self, state_dict: dict) -> None:
        """Refuse the state of another algorithm, size, noise table or rank."""
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict):
            raise CheckpointError("the optimizer's state is not a mapping with a 'state' "
                                  "mapping; the checkpoint is damaged or was not written by "
                                  "neuroevo")
        for key, mine in (("algorithm", self.name), ("num_params", self.num_params),
                          ("noise", self.noise.spec), ("rank", self.rank)):
            theirs = state_dict.get(key, 0 if key == "rank" else None)  # before ranks: 0
            if theirs != mine:
                raise CheckpointError(f"state dict has {key}={theirs!r} but this "
                                      f"optimizer has {mine!r}; build the optimizer with the "
                                      "settings of the run that saved it")

    def state_dims(self) -> dict[str, int | None]:
        """The sizes of the dimensions the state's fields declare (``neuroevo.schema``):
        ``D``, the parameters, and an algorithm's own (MAP-Elites' ``cells``); None: bound by
        the checkpoint itself, every field that uses it agreeing."""
        return {"D": self.num_params, "d": self.behaviour_dims}

    def expect_behaviour(self, dims: int | None) -> None:
        """The run's behaviour characterisations have ``dims`` dimensions (None: not known
        before the first episode ends); a checkpoint's archive must have as many."""
        self.behaviour_dims = dims

    def _check_layout(self, values: dict) -> None:
        """Refuse, before the fields are checked, the state of a run whose config sizes it
        otherwise (another grid, another meta-population), with the keys to resume with."""

    def _check_state(self, state) -> None:
        """Refuse a state whose fields each passed ``neuroevo.schema`` but do not agree
        with each other (an index into another field, a phase and what it needs)."""

    def checked_state(self, values: dict):
        """The state dataclass built from a checkpoint's ``state`` mapping once every field
        is what it declares and the fields agree, else a one-line ``CheckpointError``."""
        self._check_layout(values)
        state = schema.build(type(self.state), values, self.state_dims(), "optimizer state")
        self._check_state(state)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Continue from ``state_dict``, checked whole before anything changes."""
        self.check_header(state_dict)
        self.state = self.checked_state(state_dict["state"])
        self._pending = None


class CenterSearch(Optimizer):
    """Base of the algorithms that move a search distribution's centre and deploy it (ES,
    PGPE, sep-CMA-ES): members are ``Perturbation``s ``center + sign * scale * eps(seed)``
    (one seed per antithetic pair), ``state.center`` is what the run deploys, and copies of
    it give the test score and the row's ``center_score``. A subclass gives ``_scale``."""

    deploys = "centre"
    state_types = (Perturbation,)

    @property
    def center(self) -> torch.Tensor:
        return self.state.center

    def deployed_params(self) -> torch.Tensor:
        return self.state.center

    def _scale(self):
        """The members' perturbation std now: a float, or a ``[D]`` tensor (a copy)."""
        raise NotImplementedError

    def _population(self, genomes, generation: int, phase: str, budgeted: bool = True):
        """``genomes`` around the current centre and scale (the population keeps both)."""
        center, scale = self.state.center.clone(), self._scale()
        return Population(genomes, generation, phase, lambda device: PerturbationDecoder(
            self.noise, center, scale, device, self.lowrank), budgeted=budgeted)

    def _pairs(self) -> Population:
        """This generation's training members (``antithetic_pairs``) around the centre."""
        return self._population(antithetic_pairs(self.rng(), self.population_size),
                                self.state.generation, "train")

    def _copies(self, episodes: int, phase: str) -> Population:
        """``episodes`` copies of the centre (sign 0 decodes to it bit for bit), as phase
        ``phase`` of the last finished generation, outside the budget."""
        return self._population([Perturbation(0, 0)] * episodes,
                                max(self.state.generation - 1, 0), phase, budgeted=False)

    def test_population(self, episodes: int) -> Population:
        return self._copies(episodes, "test")

    def center_population(self) -> Population | None:
        return self._copies(self.center_episodes, "validate") if self.center_episodes else None


@dataclass(frozen=True)
class CenterParams(Params):
    """The key every ``CenterSearch`` algorithm has, besides its own."""

    validation_episodes: int = param(5, ">= 0", at_least(0))  # episodes of the centre per
    # generation, for the row's center_score only (outside the budget; 0: none)

    def logging_episodes(self) -> int:
        return self.validation_episodes
