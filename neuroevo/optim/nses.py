"""NS-ES, NSR-ES and NSRA-ES: Conti et al. 2018, "Improving Exploration in Evolution
Strategies for Deep Reinforcement Learning via a Population of Novelty-Seeking Agents"
(NeurIPS 2018, arXiv 1712.06560), as in the authors' code (``es_distributed/nses.py``).

A meta-population of M centres, each an OpenAI-ES search with its own Adam state. The
archive starts with the M centres' behaviour characterisations (BCs). Each generation:

1. ``train``: antithetic pairs around the selected centre (one seed per pair). Each
   member's novelty is the mean distance of its BC to its k nearest neighbours in the
   archive (``neuroevo.optim.novelty``; the archive stays as it was during the generation).
   The score that OpenAI-ES's update follows is the centred rank of the novelty (NS-ES),
   the mean of the centred ranks of reward and novelty (NSR-ES), or ``w * rank(reward) +
   (1 - w) * rank(novelty)`` (NSRA-ES); the update is OpenAI-ES's: ``g = sum (s+ - s-) eps /
   2n``, Adam on ``-g + l2 * theta``.
2. ``validate``: ``bc_episodes`` episodes of the updated centre (no action noise); the mean
   of their BCs joins the archive (one point a generation; the archive is never pruned),
   and the mean of their returns is the centre's reward.
3. The next centre is drawn with probability proportional to each centre's novelty
   against the archive.

NSRA-ES's weight ``w`` (the reward's share) starts at 1.0. When a generation's centre
reward beats the best so far, ``w`` rises by ``weight_delta`` (at most 1) and the
stagnation count restarts; after ``weight_patience`` generations without such an
improvement ``w`` falls by ``weight_delta`` (at least 0). The paper gives this schedule
(``w`` starts at 1, falls while performance stays flat, rises when it improves); the
authors' code has no NSRA-ES, and the step 0.05 and the window of 10 generations are
those of the reimplementations we found (Baidu's esbox NSRAES: ``w_delta=0.05, w_t=10``).

Where we differ from the authors' code:

- The centres a generation does not update keep the BC measured at their last
  evaluation; the authors' master rolls every centre again before each selection, which
  for a policy that has not changed only redraws the start states.
- The first generation trains centre 0, as theirs (``curr_parent = 0``); the initial BCs
  are measured in its first pass (phase ``validate``, ``bc_episodes`` episodes per centre).
- A run has one observation normaliser for all centres (theirs keeps one per centre).
- What a run deploys and tests is the centre with the best reward at its last
  evaluation (theirs logs the updated centre's evaluations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import CheckpointError, ConfigError, check_range
from neuroevo.genomes import Perturbation, PerturbationDecoder, Population
from neuroevo.metrics import Metric
from neuroevo.noise import NoiseTable
from neuroevo.optim.adam import AdamState, adam_step
from neuroevo.optim.base import Optimizer, antithetic_pairs
from neuroevo.optim.novelty import METRICS as NOVELTY_METRICS
from neuroevo.optim.novelty import append, novelty
from neuroevo.optim.openai_es import antithetic_gradient
from neuroevo.optim.registry import Algorithm, Params, Start, at_least, param
from neuroevo.optim.shaping import centered_ranks
from neuroevo.schema import choice, integer, length, real, tensor


@dataclass
class NSESState:
    centers: torch.Tensor = field(metadata=tensor(("M", "D"), torch.float32))
    adams: list[AdamState] = field(metadata=length("M"))  # one per centre
    bcs: torch.Tensor | None = field(default=None, metadata=tensor(("M", "d"), torch.float64))
    # each centre's BC at its last evaluation
    rewards: torch.Tensor | None = field(default=None, metadata=tensor(("M",), torch.float64))
    # each centre's mean return then
    archive: torch.Tensor | None = field(default=None, metadata=tensor(("n", "d"), torch.float64))
    current: int = field(default=0, metadata=integer(0, "M"))  # the centre this generation
    # updates
    phase: str = field(default="init", metadata=choice("init", "train", "validate"))  # what the
    # next ask gives: init (every centre's BC), train, validate
    weight: float = 1.0  # NSRA-ES: the reward's share of the score
    stagnation: int = field(default=0, metadata=integer(0))  # NSRA-ES: generations since the
    # best centre reward last rose
    best_reward: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))
    # NSRA-ES: the best centre reward so far
    generation: int = field(default=0, metadata=integer(0))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))


class _Centres:
    """Decodes ``Perturbation(m, 0)`` to centre ``m`` of a meta-population (its BC pass)."""

    def __init__(self, noise: NoiseTable, centers: torch.Tensor, device):
        self.noise, self.device = noise, torch.device(device or "cpu")
        self.centers = centers.to(self.device, torch.float32)

    def decode(self, genome: Perturbation) -> torch.Tensor:
        return self.centers[genome.seed]


class NoveltyES(Optimizer):
    """The NS-ES family over a meta-population of centres (module docstring); maximises
    the score of its mode. ``centers``: ``[M, D]`` initial centres (independent random
    networks). ``population_size``: the members around the selected centre per generation
    (antithetic pairs: even). ``k``: the nearest neighbours of novelty (paper: 10).
    ``bc_episodes``: episodes of a centre whose mean BC joins the archive (the authors'
    configs: 5 on Humanoid, 1 on Atari). ``sigma``, ``lr``, ``l2``: OpenAI-ES's (paper:
    0.02, 0.01, 0.005). ``weight_delta``, ``weight_patience``: NSRA-ES's schedule."""

    name = "nses"
    mode = "novelty"  # novelty | mean | adaptive: how reward and novelty make the score
    deploys = "centre"
    uses_behaviour = True
    metrics = (*NOVELTY_METRICS,
               Metric("center_reward", "NS-ES: the updated centre's mean return over its "
                      "behaviour episodes (in the budget)", csv=True, board=True),
               Metric("center_index", "NS-ES: the centre this generation updated", csv=True),
               Metric("reward_weight", "NSRA-ES: the reward's share of the score", csv=True,
                      board=True))
    state_types = (AdamState,)

    def __init__(self, centers, *, population_size: int = 1000, sigma: float = 0.02,
                 lr: float = 0.01, l2: float = 0.005, k: int = 10, bc_episodes: int = 1,
                 weight_delta: float = 0.05, weight_patience: int = 10, seed: int = 0,
                 noise: NoiseTable | None = None, nonfinite: str = "raise"):
        centers = torch.as_tensor(centers, dtype=torch.float32).detach().clone()
        check_range("centers", tuple(centers.shape), centers.ndim == 2 and len(centers) >= 1
                    and bool(torch.isfinite(centers).all()), "a finite [M, D] tensor, M >= 1")
        super().__init__(centers.shape[1], population_size, seed, noise, nonfinite)
        check_range("population_size", population_size, population_size % 2 == 0,
                    "an even number (members come in antithetic pairs)")
        check_range("sigma", sigma, sigma > 0, "> 0")
        check_range("lr", lr, lr > 0, "> 0")
        check_range("l2", l2, l2 >= 0, ">= 0")
        check_range("k", k, isinstance(k, int) and k >= 1, "an integer >= 1 (the paper: 10)")
        check_range("bc_episodes", bc_episodes, isinstance(bc_episodes, int) and bc_episodes >= 1,
                    ">= 1")
        check_range("weight_delta", weight_delta, 0 <= weight_delta <= 1, "in [0, 1]")
        check_range("weight_patience", weight_patience,
                    isinstance(weight_patience, int) and weight_patience >= 1, ">= 1")
        self.sigma, self.lr, self.l2, self.k = float(sigma), float(lr), float(l2), k
        self.bc_episodes = bc_episodes
        self.weight_delta, self.weight_patience = float(weight_delta), weight_patience
        self.state = NSESState(centers, [AdamState.zeros(self.num_params) for _ in centers])

    @property
    def meta_population(self) -> int:
        return len(self.state.centers)

    def state_dims(self) -> dict[str, int | None]:
        return {**super().state_dims(), "M": self.meta_population}

    def _check_layout(self, values: dict) -> None:
        centers = values.get("centers")
        if isinstance(centers, torch.Tensor) and centers.ndim == 2 and \
                len(centers) != self.meta_population:
            raise CheckpointError(f"the checkpoint's meta-population has {len(centers)} "
                                  f"centres but this run has {self.meta_population}; resume "
                                  "with the algo.centres the run was started with")

    def _check_state(self, state: NSESState) -> None:
        if state.phase != "init" and (state.bcs is None or state.rewards is None or
                                      state.archive is None or len(state.archive) == 0):
            raise CheckpointError(f"optimizer state.phase is {state.phase} but the centres' "
                                  "behaviour, rewards or the archive is missing: they are "
                                  "measured in the first (init) pass")
        if not 0 <= state.weight <= 1:
            raise CheckpointError(f"optimizer state.weight holds {state.weight!r}, expected a "
                                  "number in [0, 1]")

    # -- populations ---------------------------------------------------------------------
    def _around(self, genomes, generation: int, phase: str, budgeted: bool = True):
        center = self.state.centers[self.state.current].clone()
        return Population(genomes, generation, phase, lambda device: PerturbationDecoder(
            self.noise, center, self.sigma, device), budgeted=budgeted)

    def _ask(self) -> Population:
        s = self.state
        if s.phase == "init":
            centers = s.centers.clone()
            genomes = [Perturbation(m, 0) for m in range(len(centers))
                       for _ in range(self.bc_episodes)]
            return Population(genomes, s.generation, "validate",
                              lambda device: _Centres(self.noise, centers, device))
        if s.phase == "train":
            return self._around(antithetic_pairs(self.rng(), self.population_size),
                                s.generation, "train")
        return self._around([Perturbation(0, 0)] * self.bc_episodes, s.generation, "validate")

    def member_params(self, index: int) -> torch.Tensor:
        """``[D]`` parameters of centre ``index`` of the meta-population."""
        if not 0 <= index < self.meta_population:
            raise ConfigError(f"centre {index} does not exist: the meta-population has "
                              f"centres 0 to {self.meta_population - 1}")
        return self.state.centers[index]

    def _best(self) -> int:
        return int(torch.argmax(self.state.rewards))

    def deployed_params(self) -> torch.Tensor | None:
        return None if self.state.rewards is None else self.state.centers[self._best()]

    def test_population(self, episodes: int) -> Population | None:
        if self.state.rewards is None:
            return None
        center = self.state.centers[self._best()].clone()
        return Population([Perturbation(0, 0)] * episodes, max(self.state.generation - 1, 0),
                          "test", lambda device: PerturbationDecoder(
                              self.noise, center, self.sigma, device), budgeted=False)

    # -- the generation ------------------------------------------------------------------
    def score(self, fitness: np.ndarray, novelties: np.ndarray) -> np.ndarray:
        """What the update follows, from the members' returns and novelties."""
        if self.mode == "novelty":
            return centered_ranks(novelties)
        w = 0.5 if self.mode == "mean" else self.state.weight
        return w * centered_ranks(fitness) + (1 - w) * centered_ranks(novelties)

    def _tell_behaviour(self, pop: Population, fitness: np.ndarray, behaviour: np.ndarray
                        ) -> tuple[dict, bool]:
        s = self.state
        if s.phase == "init":
            per = behaviour.reshape(self.meta_population, self.bc_episodes, -1)
            s.bcs = torch.as_tensor(per.mean(1), dtype=torch.float64)
            s.rewards = torch.as_tensor(fitness.reshape(self.meta_population, -1).mean(1))
            s.archive = s.bcs.clone()
            s.phase = "train"
            return {"archive_size": len(s.archive)}, False
        if s.phase == "train":
            novelties = novelty(s.archive, behaviour, self.k)
            g = antithetic_gradient(self.noise, None, pop, self.score(fitness, novelties),
                                    self.num_params)
            m = s.current
            s.centers[m] = adam_step(s.centers[m], -g + self.l2 * s.centers[m], s.adams[m],
                                     self.lr)
            s.phase = "validate"
            return {"novelty_mean": float(novelties.mean())}, False
        return self._after_update(fitness, behaviour), True

    def _after_update(self, fitness: np.ndarray, behaviour: np.ndarray) -> dict:
        """The updated centre's BC joins the archive; NSRA-ES's weight; the next centre."""
        s = self.state
        bc, reward = behaviour.mean(0), float(fitness.mean())
        s.archive = append(s.archive, bc[None])
        s.bcs[s.current], s.rewards[s.current] = torch.as_tensor(bc), reward
        if reward > s.best_reward:
            s.best_reward, s.stagnation = reward, 0
            s.weight = min(1.0, s.weight + self.weight_delta)
        else:
            s.stagnation += 1
            if s.stagnation >= self.weight_patience:
                s.weight, s.stagnation = max(0.0, s.weight - self.weight_delta), 0
        out = {"center_reward": reward, "center_index": s.current,
               "archive_size": len(s.archive), "reward_weight": s.weight}
        centre_novelty = novelty(s.archive, s.bcs, self.k)
        total = centre_novelty.sum()
        p = (centre_novelty / total if total > 0
             else np.full(self.meta_population, 1 / self.meta_population))
        s.current = int(self.rng("validate").choice(self.meta_population, p=p))
        s.phase = "train"
        return out


class NSRES(NoveltyES):
    name, mode = "nsres", "mean"


class NSRAES(NoveltyES):
    name, mode = "nsraes", "adaptive"


@dataclass(frozen=True)
class NSESParams(Params):
    sigma: float = param(0.02, "> 0", lambda v: v > 0)  # perturbation std (paper: 0.02)
    lr: float = param(0.01, "> 0", lambda v: v > 0)  # Adam step size (paper: 0.01)
    l2: float = param(0.005, ">= 0", lambda v: v >= 0)  # L2 coefficient (paper: 0.005)
    k: int = param(10, ">= 1", at_least(1))  # nearest neighbours of novelty (paper: 10)
    centres: int = param(5, ">= 1", at_least(1))  # the meta-population M (authors' configs:
    # 5 on Humanoid, 3 on Frostbite)
    bc_episodes: int = param(1, ">= 1", at_least(1))  # episodes of an updated centre whose
    # mean BC joins the archive (authors' configs: 5 on Humanoid, 1 on Frostbite)

    def largest_pass(self, population: int) -> int:
        return max(population, self.centres * self.bc_episodes)  # the first BC pass


@dataclass(frozen=True)
class NSRAESParams(NSESParams):
    weight_delta: float = param(0.05, "in [0, 1]", lambda v: 0 <= v <= 1)  # NSRA-ES: the
    # step of the reward weight w
    weight_patience: int = param(10, ">= 1", at_least(1))  # NSRA-ES: generations without a
    # better centre reward before w falls


def _factory(cls):
    def from_config(p: NSESParams, start: Start) -> NoveltyES:
        centers = torch.stack([start.initial(m) for m in range(p.centres)])
        extra = (dict(weight_delta=p.weight_delta, weight_patience=p.weight_patience)
                 if isinstance(p, NSRAESParams) else {})
        return cls(centers, population_size=start.population, sigma=p.sigma, lr=p.lr, l2=p.l2,
                   k=p.k, bc_episodes=p.bc_episodes, seed=start.seed, **extra)
    return from_config


ALGORITHMS = (
    Algorithm(NoveltyES, NSESParams, _factory(NoveltyES), pbt=("sigma", "lr", "l2"),
              doc="NS-ES (Conti et al. 2018): ES on novelty, a meta-population of centres"),
    Algorithm(NSRES, NSESParams, _factory(NSRES), pbt=("sigma", "lr", "l2"),
              doc="NSR-ES (Conti et al. 2018): ES on the mean of reward and novelty ranks"),
    Algorithm(NSRAES, NSRAESParams, _factory(NSRAES), pbt=("sigma", "lr", "l2"),
              doc="NSRA-ES (Conti et al. 2018): NSR-ES with an adaptive reward weight"),
)
