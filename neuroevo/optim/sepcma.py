"""sep-CMA-ES: Ros & Hansen 2008, "A Simple Modification in CMA-ES Achieving Linear Time and
Space Complexity" (PPSN X). CMA-ES with a diagonal covariance ``C = diag(c)``: sampling and
every update are O(D), so it scales to a network's parameters, where full CMA-ES's D x D
matrix does not fit (1M parameters: 4 TB).

A generation samples ``x_k = m + sigma * sqrt(c) * z_k`` (``z_k`` a slice of the shared noise
table named by a seed, so a member is a seed). With the ``mu = lambda // 2`` best (ranked by
fitness, ties by index), ``w_i = ln(mu + 1) - ln(i)`` normalised, ``mu_eff = 1 / sum w_i^2``,
``y_i = sqrt(c) * z_i`` and ``chi = E|N(0, I)| ~ sqrt(D) (1 - 1/(4D) + 1/(21 D^2))``:

    m       <- m + sigma * sum w_i y_i
    p_sigma <- (1 - c_sigma) p_sigma + sqrt(c_sigma (2 - c_sigma) mu_eff) sum w_i z_i
    h       =  |p_sigma| / sqrt(1 - (1 - c_sigma)^(2 (g + 1))) < (1.4 + 2 / (D + 1)) chi
    p_c     <- (1 - c_c) p_c + h sqrt(c_c (2 - c_c) mu_eff) sum w_i y_i
    c       <- (1 - c_cov) c + c_cov / mu_eff (p_c^2 + (1 - h) c_c (2 - c_c) c)
               + c_cov (1 - 1 / mu_eff) sum w_i y_i^2
    sigma   <- sigma exp(c_sigma / d_sigma (|p_sigma| / chi - 1))

with the paper's constants: ``c_sigma = (mu_eff + 2) / (D + mu_eff + 3)``, ``d_sigma = 1 + 2
max(0, sqrt((mu_eff - 1) / (D + 1)) - 1) + c_sigma``, ``c_c = 4 / (D + 4)``, and CMA-ES's
``c_cov`` (``mu_cov = mu_eff``) times ``(D + 2) / 3``, the separable version's faster
learning rate. Squares and products of vectors are elementwise.

Where this differs from the paper: the population size is the run's ``algo.population``
(the paper's default is ``4 + floor(3 ln D)``: 45 at 1M parameters), and ``z_k`` are
overlapping slices of one noise table rather than independent draws (as OpenAI-ES's). It is
not pycma's ``CMA_diagonal`` either, which updates ``c`` multiplicatively, with negative
weights and its own rates, and adapts ``sigma`` by two-point adaptation above 299 dimensions.

>>> es = SepCMAES(center=torch.ones(4), population_size=8, seed=0)
>>> pop = es.ask(); pop.params().shape
torch.Size([8, 4])
>>> es.tell([-float((p**2).sum()) for p in pop.params()])["sigma"] > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import check_range
from neuroevo.genomes import SEED_BOUND, Perturbation, Population
from neuroevo.metrics import BY_NAME, Metric
from neuroevo.noise import NoiseTable
from neuroevo.optim.base import CenterParams, CenterSearch, resolve_dims
from neuroevo.optim.registry import Algorithm, Start, param
from neuroevo.optim.shaping import top_k
from neuroevo.schema import integer, real, tensor


@dataclass
class SepCMAState:
    center: torch.Tensor = field(metadata=tensor(("D",), torch.float32))  # m
    sigma: float = field(metadata=real("positive"))  # the step size
    diag: torch.Tensor = field(metadata=tensor(("D",), torch.float32, "positive"))  # c, the
    # covariance's diagonal
    path_sigma: torch.Tensor = field(metadata=tensor(("D",), torch.float32))  # p_sigma
    path_c: torch.Tensor = field(metadata=tensor(("D",), torch.float32))  # p_c
    generation: int = field(default=0, metadata=integer(0))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))


@dataclass(frozen=True)
class Constants:
    """The paper's strategy parameters for D dimensions and lambda members."""

    weights: np.ndarray  # [mu] w_i, summing to 1
    mu_eff: float
    c_sigma: float
    d_sigma: float
    c_c: float
    c_cov: float
    chi: float  # E|N(0, I)|

    @classmethod
    def of(cls, dims: int, population: int) -> Constants:
        mu = population // 2
        w = math.log(mu + 1) - np.log(np.arange(1, mu + 1))
        w = w / w.sum()
        mu_eff = float(1 / (w ** 2).sum())
        c_sigma = (mu_eff + 2) / (dims + mu_eff + 3)
        d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (dims + 1)) - 1) + c_sigma
        c_cov = (2 / (dims + math.sqrt(2)) ** 2 / mu_eff + (1 - 1 / mu_eff) *
                 min(1.0, (2 * mu_eff - 1) / ((dims + 2) ** 2 + mu_eff))) * (dims + 2) / 3
        chi = math.sqrt(dims) * (1 - 1 / (4 * dims) + 1 / (21 * dims ** 2))
        return cls(w, mu_eff, c_sigma, d_sigma, 4 / (dims + 4), c_cov, chi)


class SepCMAES(CenterSearch):
    """sep-CMA-ES (Ros & Hansen 2008); maximises fitness.

    Args:
        num_params: D, when starting from zeros; or give ``center``, the initial mean.
        population_size: lambda, members per generation (>= 4).
        sigma: the initial step size (every coordinate's std starts at it).
        center_episodes: copies of the mean scored each generation for logging only.
        seed, noise, nonfinite: as for ``GA``.
    """

    name = "sepcma"
    metrics = (BY_NAME["sigma"], BY_NAME["stdev_mean"],
               Metric("axis_ratio", "sep-CMA-ES: sqrt(max c / min c), the covariance's "
                                    "condition"))

    def __init__(self, num_params: int | None = None, *, center=None,
                 population_size: int = 64, sigma: float = 0.02, center_episodes: int = 0,
                 seed: int = 0, noise: NoiseTable | None = None, nonfinite: str = "raise"):
        num_params, center = resolve_dims(num_params, center)
        super().__init__(num_params, population_size, seed, noise, nonfinite)
        check_range("population_size", population_size, population_size >= 4,
                    ">= 4 (two parents at least)")
        check_range("sigma", sigma, isinstance(sigma, (int, float)) and sigma > 0, "> 0")
        check_range("center_episodes", center_episodes, center_episodes >= 0, ">= 0")
        self.center_episodes = center_episodes
        self.constants = Constants.of(num_params, population_size)
        center = torch.zeros(num_params) if center is None else center
        zeros = torch.zeros(num_params)
        self.state = SepCMAState(center=center, sigma=float(sigma),
                                 diag=torch.ones(num_params), path_sigma=zeros.clone(),
                                 path_c=zeros.clone())

    def _scale(self) -> torch.Tensor:
        return self.state.sigma * self.state.diag.sqrt()

    def _ask(self) -> Population:
        seeds = self.rng().integers(0, SEED_BOUND, self.population_size)
        return self._population([Perturbation(int(k), 1) for k in seeds],
                                self.state.generation, "train")

    def _tell(self, pop: Population, fitness: np.ndarray) -> tuple[dict, bool]:
        s, k, dims = self.state, self.constants, self.num_params
        root = s.diag.sqrt()
        z_w, y2_w = torch.zeros(dims), torch.zeros(dims)
        # A fixed-order sum: the same result whatever the number of threads.
        for w, i in zip(k.weights, top_k(fitness, len(k.weights)), strict=True):
            z = self.noise.slice(pop.genomes[i].seed, dims)
            z_w.add_(z, alpha=float(w))
            y2_w.add_((root * z) ** 2, alpha=float(w))
        y_w = root * z_w
        s.center = s.center + s.sigma * y_w
        s.path_sigma = ((1 - k.c_sigma) * s.path_sigma +
                        math.sqrt(k.c_sigma * (2 - k.c_sigma) * k.mu_eff) * z_w)
        norm = float(s.path_sigma.norm())
        h = norm / math.sqrt(1 - (1 - k.c_sigma) ** (2 * (s.generation + 1))) < \
            (1.4 + 2 / (dims + 1)) * k.chi
        s.path_c = (1 - k.c_c) * s.path_c + (
            float(h) * math.sqrt(k.c_c * (2 - k.c_c) * k.mu_eff)) * y_w
        s.diag = ((1 - k.c_cov) * s.diag + k.c_cov / k.mu_eff * (
            s.path_c ** 2 + (1 - float(h)) * k.c_c * (2 - k.c_c) * s.diag) +
            k.c_cov * (1 - 1 / k.mu_eff) * y2_w)
        s.sigma = s.sigma * math.exp(k.c_sigma / k.d_sigma * (norm / k.chi - 1))
        return {"sigma": s.sigma, "stdev_mean": s.sigma * float(s.diag.sqrt().mean()),
                "axis_ratio": float((s.diag.max() / s.diag.min()).sqrt())}, True


@dataclass(frozen=True)
class SepCMAParams(CenterParams):
    sigma: float = param(0.02, "> 0", lambda v: v > 0)  # the initial step size (then adapted)


def from_config(p: SepCMAParams, start: Start) -> SepCMAES:
    return SepCMAES(center=start.initial(), population_size=start.population, sigma=p.sigma,
                    center_episodes=p.validation_episodes, seed=start.seed)


ALGORITHM = Algorithm(SepCMAES, SepCMAParams, from_config,
                      doc="sep-CMA-ES (Ros & Hansen 2008): diagonal covariance, O(D)")
