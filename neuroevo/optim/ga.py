"""Deep GA: Such et al. 2017, "Deep Neuroevolution: Genetic Algorithms Are a Competitive
Alternative for Training Deep Neural Networks for Reinforcement Learning" (arXiv 1712.06567).

Elitism follows Algorithm 1 of the revised paper (v3). Each generation, every member runs
one training episode. The elite candidates are, in the first generation, the
``elite_candidates`` (paper: 10) best members by training fitness; in every later one, the
previous elite *plus* the ``elite_candidates - 1`` best other members (at least one),
whatever the previous elite's own training episode scored. The next ``ask()`` after a
training ``tell()`` returns that validation population (each candidate repeated
``validation_episodes`` times, paper: 30, on fresh episodes, members adjacent), and the
candidate with the best mean becomes the elite; the training episode is left out of the mean
because it is what selected the candidates (it is biased upwards). The parents of the next
generation are the elite plus the ``truncation - 1`` best *other* members by training fitness
(paper: T = 20), so the elite always breeds; ``population_size - 1`` children are
``parent + sigma * noise`` of uniformly chosen parents, and the elite is carried *unmodified*
as member 0 (as the paper describes; the authors' 2018 GPU code re-validated the previous
elite and always bred it, but did not carry it). Setting either option to 0 skips the
validation: the best training fitness is the elite, and the parents are the top T.

``train_episodes`` > 1 is a deviation from the paper, which plays one: each member then
plays that many training episodes (adjacent, each on its own seed) and its training fitness
is their mean, which ranks the candidates and the parents. On Atari with sticky actions off
a member's score is a lottery over at most 30 start states (breakout's random small nets
score 0, 10 or 20 by start), so one episode ranks the starts more than the networks; the
quick Atari default plays two (``neuroevo.envs.spec.Kind``), the paper configs one.

>>> ga = GA(num_params=3, population_size=8, truncation=2, elite_candidates=0, seed=1)
>>> pop = ga.ask(); len(pop), pop.params().shape
(8, torch.Size([8, 3]))
>>> ga.tell([float(p.sum()) for p in pop.params()])["generation_done"]
True
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from neuroevo.errors import CheckpointError, check_range
from neuroevo.genomes import SEED_BOUND, ChainDecoder, Population, SeedChain
from neuroevo.metrics import BY_NAME
from neuroevo.noise import NoiseTable
from neuroevo.optim.base import Optimizer, low_rank, resolve_dims
from neuroevo.optim.registry import Algorithm, Params, Start, at_least, param
from neuroevo.optim.schedules import as_schedule
from neuroevo.optim.shaping import top_k
from neuroevo.schema import choice, integer, real


@dataclass
class GAState:
    generation: int = field(default=0, metadata=integer(0))
    phase: str = field(default="train", metadata=choice("train", "validate"))
    parents: tuple[SeedChain, ...] = ()
    candidates: tuple[SeedChain, ...] = ()
    ranked: tuple[SeedChain, ...] = ()  # while validating: the T + 1 best by training fitness
    elite: SeedChain | None = None
    elite_score: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))
    best: SeedChain | None = None  # the member with the best single training episode
    history: list[float] = field(default_factory=list, metadata=real("finite_or_-inf"))  # elite
    # score per generation


class GA(Optimizer):
    """Deep GA over seed-chain genomes (``SeedChain``); maximises fitness.

    Args:
        num_params: D, the length of a parameter vector (or give ``center``).
        center: mean of the random initial networks (default zeros).
        init_std: std of the random initial networks, a float or a ``[D]`` tensor (a policy
            gives its per-layer fan-in scaled stds here).
        population_size: N members per generation, elite included (paper: 1000).
        truncation: T parents, the top T of each generation (paper: 20).
        sigma: mutation power, a float or a schedule from ``neuroevo.optim.schedules``
            (paper: 0.002).
        elite_candidates, validation_episodes: the elite re-evaluation (paper: 10, 30).
        train_episodes: training episodes per member, whose mean is its fitness (paper: 1;
            module docstring).
        seed: the run's seed; the same seed gives the same genomes.
        noise: the shared ``NoiseTable`` (default: a table sized for D).
        nonfinite: ``"raise"`` on NaN/+inf fitness, or ``"worst"`` to score them -inf.
        cache_size: decoded parents kept per device (default 2T + 2).
        rank, shapes: ``rank`` > 0 makes each mutation a rank-``rank`` product per matrix
            block of ``shapes`` (flat order; biases at full rank), as ES's low-rank
            perturbations (``neuroevo.lowrank``); the initial networks stay full rank.
            0: full rank (the paper).
    """

    name = "ga"
    metrics = (BY_NAME["elite_score"], BY_NAME["sigma"])
    state_types = (SeedChain,)

    def __init__(self, num_params: int | None = None, *, center=None, init_std=1.0,
                 population_size: int = 1000, truncation: int = 20, sigma=0.002,
                 elite_candidates: int = 10, validation_episodes: int = 30, seed: int = 0,
                 noise: NoiseTable | None = None, nonfinite: str = "raise",
                 cache_size: int | None = None, rank: int = 0, shapes=None,
                 train_episodes: int = 1):
        num_params, self.center = resolve_dims(num_params, center)
        super().__init__(num_params, population_size, seed, noise, nonfinite)
        self.lowrank = low_rank(rank, shapes, num_params)
        self.init_std = torch.as_tensor(init_std, dtype=torch.float32)
        check_range("init_std", init_std, self.init_std.numel() in (1, num_params) and
                    bool((self.init_std >= 0).all()) and bool(torch.isfinite(self.init_std).all()),
                    f"a float >= 0 or a [{num_params}] tensor of them")
        self._check_selection(population_size, truncation)
        check_range("elite_candidates", elite_candidates,
                    isinstance(elite_candidates, int) and 0 <= elite_candidates <= population_size,
                    f"an integer in [0, population_size={population_size}]")
        check_range("validation_episodes", validation_episodes,
                    isinstance(validation_episodes, int) and validation_episodes >= 0,
                    "an integer >= 0")
        check_range("train_episodes", train_episodes,
                    isinstance(train_episodes, int) and train_episodes >= 1,
                    "an integer >= 1 (the paper: 1)")
        self.train_episodes = train_episodes
        self.truncation, self.sigma = truncation, as_schedule(sigma)
        validating = elite_candidates > 0 and validation_episodes > 0
        self.elite_candidates = elite_candidates if validating else 0
        self.validation_episodes = validation_episodes if validating else 0
        self.cache_size = 2 * truncation + 2 if cache_size is None else cache_size
        self.state = GAState()
        self._decoders: dict[torch.device, ChainDecoder] = {}

    def _check_selection(self, population_size: int, truncation: int) -> None:
        check_range("population_size", population_size, population_size >= 2,
                    ">= 2 (the elite plus at least one child)")
        check_range("truncation", truncation,
                    isinstance(truncation, int) and 1 <= truncation <= population_size,
                    f"an integer in [1, population_size={population_size}]")

    def _check_state(self, state: GAState) -> None:
        if state.parents and state.elite is None:
            raise CheckpointError("optimizer state.parents holds parents but state.elite is "
                                  "None: every generation after the first breeds the elite")
        if state.phase == "validate" and not (state.candidates and state.ranked):
            raise CheckpointError("optimizer state.phase is validate but state.candidates or "
                                  "state.ranked is empty: there is nothing to validate")

    def decoder(self, device=None) -> ChainDecoder:
        """The per-device decoder; it lives across generations so parents stay cached."""
        device = torch.device(device or "cpu")
        if device not in self._decoders:
            self._decoders[device] = ChainDecoder(self.noise, self.num_params, self.center,
                                                  self.init_std, self.cache_size, device,
                                                  self.lowrank)
        return self._decoders[device]

    @property
    def elite(self) -> SeedChain | None:
        return self.state.elite

    @property
    def elite_score(self) -> float:
        return self.state.elite_score

    def deployed_params(self) -> torch.Tensor | None:
        return None if self.state.elite is None else self.decoder().decode(self.state.elite)

    def best_params(self) -> torch.Tensor | None:
        return None if self.state.best is None else self.decoder().decode(self.state.best)

    def _fresh(self, rng: np.random.Generator, n: int) -> list[SeedChain]:
        return [SeedChain(int(s)) for s in rng.integers(0, SEED_BOUND, n)]

    def _offspring(self, rng: np.random.Generator) -> list[SeedChain]:
        s = self.state
        if not s.parents:
            return self._fresh(rng, self.population_size)
        n = self.population_size - 1
        which = rng.integers(0, len(s.parents), n)
        seeds = rng.integers(0, SEED_BOUND, n)
        sigma = self.sigma(s.generation)
        children = [s.parents[p].mutate(int(k), sigma) for p, k in zip(which, seeds, strict=True)]
        return [s.elite, *children]

    def _ask(self) -> Population:
        s = self.state
        if s.phase == "validate":
            genomes = [c for c in s.candidates for _ in range(self.validation_episodes)]
        else:
            k = self.train_episodes
            genomes = [g for g in self._offspring(self.rng("train")) for _ in range(k)]
        return Population(genomes, s.generation, s.phase, self.decoder)

    def test_population(self, episodes: int) -> Population | None:
        s = self.state
        if s.elite is None:
            return None
        return Population([s.elite] * episodes, max(s.generation - 1, 0), "test", self.decoder,
                          budgeted=False)

    def _tell(self, pop: Population, fitness: np.ndarray) -> tuple[dict, bool]:
        s = self.state
        if s.phase == "validate":
            means = fitness.reshape(len(s.candidates), self.validation_episodes).mean(axis=1)
            j = int(top_k(means, 1)[0])  # ties: the earlier candidate, the previous elite first
            s.elite, s.elite_score = s.candidates[j], float(means[j])
            others = tuple(p for p in s.ranked if p != s.elite)
            s.parents = (s.elite, *others)[: self.truncation]
            s.phase, s.candidates, s.ranked = "train", (), ()
            s.history.append(s.elite_score)
            return {"elite_score": s.elite_score, "candidate_means": means.tolist()}, True
        members, means, best = self._members(pop, fitness)
        order = top_k(means, len(means))
        return self._select(members, means, order, order, best)

    def _members(self, pop: Population, episodes: np.ndarray, *per_episode: np.ndarray
                 ) -> tuple:
        """A training pass as members: their genomes, their mean fitness
        (``train_episodes`` each, adjacent), the member that played the best episode with its
        score, and each array of ``per_episode`` averaged the same way."""
        k = self.train_episodes
        means = [a.reshape(len(pop) // k, k, *a.shape[1:]).mean(axis=1)
                 for a in (episodes, *per_episode)]
        top = int(top_k(episodes, 1)[0])
        return ([pop[i] for i in range(0, len(pop), k)], means[0],
                (top // k, float(episodes[top])), *means[1:])

    def _select(self, pop: list[SeedChain], fitness: np.ndarray, order: np.ndarray,
                breeding: np.ndarray, best: tuple[int, float]) -> tuple[dict, bool]:
        """After a training phase: the elite candidates from ``order`` (members by training
        fitness, best first), the parents from ``breeding`` (the GA: the same order;
        GA-NS: by novelty), and ``best``: the member that played the pass's best episode,
        and its score."""
        s = self.state
        if s.best is None or best[1] >= s.best_fitness:  # the base updated best_fitness
            s.best = pop[best[0]]
        metrics = {"sigma": self.sigma(s.generation)}
        if self.elite_candidates:
            # The parents wait for the elite: it is one of them, with the T - 1 best others.
            s.ranked = tuple(pop[i] for i in breeding[: self.truncation + 1])
            s.candidates = self._candidates(pop, order)
            s.phase = "validate"
            return metrics, False
        s.parents = tuple(pop[i] for i in breeding[: self.truncation])
        s.elite, s.elite_score = pop[order[0]], float(fitness[order[0]])
        s.history.append(s.elite_score)
        return {**metrics, "elite_score": s.elite_score}, True

    def _candidates(self, pop: list[SeedChain], order: np.ndarray) -> tuple[SeedChain, ...]:
        """Generation 1: the k best by training fitness; later: the previous elite and the
        k - 1 (at least 1) best others, whatever the elite's own training episode scored."""
        k, previous = self.elite_candidates, self.state.elite
        if previous is None:
            return tuple(pop[i] for i in order[:k])
        others = [pop[i] for i in order if pop[i] != previous][: max(k - 1, 1)]
        return (previous, *others)


@dataclass(frozen=True)
class EliteParams(Params):
    """The keys of an algorithm that validates its elite as the GA's Algorithm 1 (GA, RS)."""

    elite_candidates: int = param(10, ">= 0", at_least(0))  # members re-evaluated for the
    # elite (paper: 10; 0: the best training fitness is the elite)
    validation_episodes: int = param(10, ">= 0", at_least(0))  # episodes per elite candidate
    # (paper: 30)
    train_episodes: int = param(0, ">= 0 (0: the env kind's, 2 on Atari, else 1)",
                                at_least(0))  # training episodes per member, their mean its
    # fitness (paper: 1, as the paper configs; module docstring)

    def largest_pass(self, population: int) -> int:  # training or the elite's validation
        return max(population * max(self.train_episodes, 1),
                   self.elite_candidates * self.validation_episodes)

    def resolved(self, population: int, train_episodes: int = 1) -> EliteParams:
        return replace(self, elite_candidates=min(self.elite_candidates, population),
                       train_episodes=self.train_episodes or train_episodes)


@dataclass(frozen=True)
class GAParams(EliteParams):
    sigma: float = param(0.002, "> 0", lambda v: v > 0)  # mutation power (paper: 0.002)
    truncation: int = param(0, ">= 0 (0: population // 5, at most 20)", at_least(0))  # parents
    # T (paper: 20)
    rank: int = param(0, ">= 0 (0: full rank)", at_least(0))  # rank-r mutations per weight
    # matrix (EGGROLL, neuroevo.lowrank); 0: full rank, as the paper

    def resolved(self, population: int, train_episodes: int = 1) -> GAParams:
        return replace(super().resolved(population, train_episodes),
                       truncation=self.truncation or max(1, min(20, population // 5)))


def ga_arguments(p: GAParams, start: Start) -> dict:
    """The GA constructor's arguments from its config keys (GA-NS adds its own)."""
    lowrank = dict(rank=p.rank, shapes=start.shapes) if p.rank else {}
    return dict(num_params=start.num_params, init_std=start.init_std,
                population_size=start.population, truncation=p.truncation, sigma=p.sigma,
                elite_candidates=p.elite_candidates, validation_episodes=p.validation_episodes,
                train_episodes=p.train_episodes, seed=start.seed, **lowrank)


def from_config(p: GAParams, start: Start) -> GA:
    return GA(**ga_arguments(p, start))


ALGORITHM = Algorithm(GA, GAParams, from_config, pbt=("sigma", "truncation"),
                      doc="Deep GA (Such et al. 2017): truncation selection, seed chains")
