"""OpenAI-ES: Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to
Reinforcement Learning" (arXiv 1703.03864), as in the authors' code (es_distributed/es.py).

Members are antithetic pairs ``center +/- sigma * eps_i`` (adjacent in the population, one
seed per pair, so a worker ships one int). Returns are shaped by centered ranks over all
2n members; the gradient estimate is ``g = sum_i (r+_i - r-_i) * eps_i / (2n)`` (not
divided by sigma, as published) and Adam steps on the loss gradient ``-g + l2 * center``.

>>> es = OpenAIES(center=torch.ones(4), population_size=6, seed=0)
>>> pop = es.ask(); pop.params().shape
torch.Size([6, 4])
>>> round(es.tell([-float((p**2).sum()) for p in pop.params()])["grad_norm"], 3) > 0
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import check_range
from neuroevo.genomes import Population
from neuroevo.metrics import Metric
from neuroevo.noise import NoiseTable
from neuroevo.optim.adam import AdamState, adam_step
from neuroevo.optim.base import CenterParams, CenterSearch, low_rank, resolve_dims
from neuroevo.optim.registry import Algorithm, Start, at_least, param
from neuroevo.optim.shaping import centered_ranks
from neuroevo.schema import integer, real, tensor

SHAPINGS = ("centered_ranks", "none")


def antithetic_gradient(noise: NoiseTable, lowrank, pop: Population, shaped: np.ndarray,
                        num_params: int) -> torch.Tensor:
    """``g = sum_i (s+_i - s-_i) * eps_i / (2n)`` over the antithetic pairs of ``pop`` and
    their shaped scores ``shaped``: the paper's ascent direction (no 1/sigma)."""
    weights = shaped[0::2] - shaped[1::2]
    if lowrank is not None:  # one product of the stacked factors per matrix
        seeds = [genome.seed for genome in pop.genomes[0::2]]
        return lowrank.weighted_sum(noise, seeds, weights) / len(shaped)
    g = torch.zeros(num_params)
    # A fixed-order elementwise sum: the same result whatever the number of threads.
    for genome, w in zip(pop.genomes[0::2], weights, strict=True):
        g.add_(noise.slice(genome.seed, num_params), alpha=float(w))
    return g / len(shaped)


@dataclass
class ESState:
    center: torch.Tensor = field(metadata=tensor(("D",), torch.float32))
    adam: AdamState
    generation: int = field(default=0, metadata=integer(0))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))


class OpenAIES(CenterSearch):
    """OpenAI-ES with antithetic sampling, centered ranks, Adam and L2; maximises fitness.

    Args:
        num_params: D, when starting from zeros; or give ``center``, the initial parameters
            (a policy's random initialisation, say).
        population_size: members per generation, 2n for n antithetic pairs (even).
        sigma: perturbation std (paper: 0.02).
        lr, l2: Adam step size and L2 coefficient (paper: 0.01, 0.005).
        beta1, beta2, eps: Adam's constants (paper's code: 0.9, 0.999, 1e-8).
        shaping: ``"centered_ranks"`` (paper) or ``"none"`` (raw returns).
        center_episodes: the size of ``center_population()``: after each update, the
            training loop scores the new centre on this many episodes, for logging only
            (``center_score``; the paper's evaluation of the current policy). It changes
            nothing, and its episodes are outside the frame budget. 0: none.
        rank, shapes: ``rank`` > 0 perturbs each matrix block of ``shapes`` (the parameter
            blocks in flat order) by a rank-``rank`` product, as EGGROLL (Sarkar et al.
            2025, arXiv 2511.16652; ``neuroevo.lowrank``), biases at full rank; the update
            sums the members' factors in one product per matrix. 0: full rank (the paper).
        seed, noise, nonfinite: as for ``GA``.
    """

    name = "es"
    metrics = (Metric("grad_norm", "ES: norm of the gradient estimate"),
               Metric("update_ratio", "ES: norm of the update over the norm of the centre"))
    state_types = (*CenterSearch.state_types, AdamState)

    def __init__(self, num_params: int | None = None, *, center=None,
                 population_size: int = 1000, sigma: float = 0.02, lr: float = 0.01,
                 l2: float = 0.005, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, shaping: str = "centered_ranks", center_episodes: int = 0,
                 rank: int = 0, shapes=None, seed: int = 0,
                 noise: NoiseTable | None = None, nonfinite: str = "raise"):
        num_params, center = resolve_dims(num_params, center)
        super().__init__(num_params, population_size, seed, noise, nonfinite)
        self.lowrank = low_rank(rank, shapes, num_params)
        check_range("population_size", population_size, population_size % 2 == 0,
                    "an even number (members come in antithetic pairs)")
        check_range("sigma", sigma, isinstance(sigma, (int, float)) and sigma > 0, "> 0")
        check_range("lr", lr, lr > 0, "> 0")
        check_range("l2", l2, l2 >= 0, ">= 0")
        check_range("beta1", beta1, 0 <= beta1 < 1, "in [0, 1)")
        check_range("beta2", beta2, 0 <= beta2 < 1, "in [0, 1)")
        check_range("eps", eps, eps > 0, "> 0")
        check_range("shaping", shaping, shaping in SHAPINGS, f"one of {SHAPINGS}")
        check_range("center_episodes", center_episodes,
                    isinstance(center_episodes, int) and center_episodes >= 0, ">= 0")
        self.center_episodes = center_episodes
        self.sigma, self.lr, self.l2 = float(sigma), float(lr), float(l2)
        self.beta1, self.beta2, self.eps, self.shaping = beta1, beta2, eps, shaping
        center = torch.zeros(num_params) if center is None else center
        self.state = ESState(center=center, adam=AdamState.zeros(num_params))

    def _scale(self) -> float:
        return self.sigma

    def _ask(self) -> Population:
        return self._pairs()

    def load_state_dict(self, state_dict: dict) -> None:
        # Checkpoints written before the centre's episodes left ask/tell also hold its phase
        # (always "train" at a generation's end, where checkpoints are taken) and score.
        self.check_header(state_dict)
        state = {k: v for k, v in state_dict["state"].items()
                 if k not in ("phase", "center_score")}
        super().load_state_dict({**state_dict, "state": state})

    def gradient(self, pop: Population, fitness: np.ndarray) -> torch.Tensor:
        """The ascent direction ``g`` of the paper for the members of ``pop``."""
        shaped = centered_ranks(fitness) if self.shaping == "centered_ranks" else fitness
        return antithetic_gradient(self.noise, self.lowrank, pop, shaped, self.num_params)

    def _tell(self, pop: Population, fitness: np.ndarray) -> tuple[dict, bool]:
        s = self.state
        g = self.gradient(pop, fitness)
        new = adam_step(s.center, -g + self.l2 * s.center, s.adam, self.lr, self.beta1,
                        self.beta2, self.eps)
        update_ratio = float((new - s.center).norm() / s.center.norm().clamp_min(1e-12))
        s.center = new
        return {"grad_norm": float(g.norm()), "update_ratio": update_ratio,
                "center_norm": float(new.norm())}, True


@dataclass(frozen=True)
class ESParams(CenterParams):
    sigma: float = param(0.02, "> 0", lambda v: v > 0)  # perturbation std (paper: 0.02)
    lr: float = param(0.01, "> 0", lambda v: v > 0)  # Adam step size (paper: 0.01)
    l2: float = param(0.005, ">= 0", lambda v: v >= 0)  # L2 coefficient (paper: 0.005)
    rank: int = param(0, ">= 0 (0: full rank)", at_least(0))  # rank-r perturbations per weight
    # matrix (EGGROLL, neuroevo.lowrank); 0: full rank, as the paper


def from_config(p: ESParams, start: Start) -> OpenAIES:
    # ES starts from one random network (build: on vector observations OpenAI's MuJoCo
    # initialisation, normc(1.0) hidden and normc(0.01) output; else the policy's own).
    lowrank = dict(rank=p.rank, shapes=start.shapes) if p.rank else {}
    return OpenAIES(center=start.initial(), population_size=start.population, sigma=p.sigma,
                    lr=p.lr, l2=p.l2, center_episodes=p.validation_episodes, seed=start.seed,
                    **lowrank)


ALGORITHM = Algorithm(OpenAIES, ESParams, from_config, pbt=("sigma", "lr", "l2"),
                      doc="OpenAI-ES (Salimans et al. 2017): antithetic, centred ranks, Adam")
