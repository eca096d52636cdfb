"""PGPE with ClipUp: Sehnke et al. 2010, "Parameter-exploring policy gradients" (Neural
Networks 23(4)), with the ClipUp step of Toklu et al. 2020, "ClipUp: A Simple and Powerful
Optimizer for Distribution-based Policy Evolution" (arXiv 2008.02387), as EvoTorch 0.6.1's
``PGPE`` computes them (``algorithms/distributed/gaussian.py``, ``distributions.py``:
``SymmetricSeparableGaussian``, ``optimizers.py``: ``ClipUp``).

Members are symmetric pairs ``mu +/- sigma * z_j`` (adjacent, one seed per pair), ``sigma``
one std per parameter. Fitness is shaped by centred ranks over all members (``k / (n - 1) -
0.5``); with ``u+_j, u-_j`` a pair's ranks, ``eps_j = sigma * z_j`` and ``n/2`` pairs:

    grad_mu    = (2/n) sum_j (u+_j - u-_j) / 2 * eps_j
    grad_sigma = (2/n) sum_j (u+_j + u-_j) / 2 * (eps_j**2 - sigma**2) / sigma

ClipUp moves the centre: ``v <- clip(momentum * v + lr * g / |g|, max_speed)``, ``mu <- mu +
v``; the stds take a plain step ``sigma + stdev_lr * grad_sigma``, each held within
``stdev_max_change`` (relative) of its old value.

Where this differs from EvoTorch 0.6.1: the population size is fixed (no ``popsize_max`` /
``num_interactions`` growth); a zero gradient leaves the velocity to decay instead of giving
NaN (ClipUp divides by ``|g|`` with no epsilon); tied fitness ranks by index (EvoTorch's
argsort breaks ties arbitrarily); and ``z_j`` are slices of the shared noise table (as
OpenAI-ES's), so a member is a seed.

>>> pgpe = PGPE(center=torch.ones(4), population_size=6, seed=0)
>>> pop = pgpe.ask(); pop.params().shape
torch.Size([6, 4])
>>> pgpe.tell([-float((p**2).sum()) for p in pop.params()])["speed"] > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import check_range
from neuroevo.genomes import Population
from neuroevo.metrics import BY_NAME, Metric
from neuroevo.noise import NoiseTable
from neuroevo.optim.base import CenterParams, CenterSearch, resolve_dims
from neuroevo.optim.registry import Algorithm, Start, param
from neuroevo.optim.shaping import centered_ranks
from neuroevo.schema import integer, real, tensor


@dataclass
class PGPEState:
    center: torch.Tensor = field(metadata=tensor(("D",), torch.float32))  # mu
    stdev: torch.Tensor = field(metadata=tensor(("D",), torch.float32, "nonnegative"))  # sigma,
    # one std per parameter
    velocity: torch.Tensor = field(metadata=tensor(("D",), torch.float32))  # ClipUp's
    generation: int = field(default=0, metadata=integer(0))
    best_fitness: float = field(default=float("-inf"), metadata=real("finite_or_-inf"))


def clipup(velocity: torch.Tensor, grad: torch.Tensor, lr: float, momentum: float,
           max_speed: float) -> torch.Tensor:
    """ClipUp's new velocity for ascent direction ``grad`` (Toklu et al. 2020, Algorithm 1)."""
    norm = float(grad.norm())
    step = grad * (lr / norm) if norm > 0 else torch.zeros_like(grad)
    velocity = momentum * velocity + step
    speed = float(velocity.norm())
    return velocity * (max_speed / speed) if speed > max_speed else velocity


class PGPE(CenterSearch):
    """PGPE (symmetric sampling, per-parameter stds, centred ranks) with ClipUp; maximises.

    Args:
        num_params: D, when starting from zeros; or give ``center``, the initial parameters.
        population_size: members per generation, 2n for n symmetric pairs (even).
        lr: ClipUp's step size for the centre (EvoTorch's ``center_learning_rate``).
        max_speed: ClipUp's largest velocity norm (None: ``2 * lr``, EvoTorch's default).
        momentum: ClipUp's momentum (0.9, EvoTorch's default).
        radius: the initial ``|sigma|``: every std starts at ``radius / sqrt(D)``
            (EvoTorch's ``radius_init``).
        stdev_lr: the stds' step size (Toklu et al.: 0.1).
        stdev_max_change: the largest relative change of a std in one update (0.2).
        center_episodes: copies of the centre scored each generation for logging only.
        seed, noise, nonfinite: as for ``GA``.
    """

    name = "pgpe"
    metrics = (BY_NAME["stdev_mean"], Metric("speed", "PGPE: the norm of ClipUp's velocity, "
                                                      "the centre's step"))
    state_types = CenterSearch.state_types

    def __init__(self, num_params: int | None = None, *, center=None,
                 population_size: int = 100, lr: float = 0.01125,
                 max_speed: float | None = None, momentum: float = 0.9,
                 radius: float = 0.225, stdev_lr: float = 0.1, stdev_max_change: float = 0.2,
                 center_episodes: int = 0, seed: int = 0, noise: NoiseTable | None = None,
                 nonfinite: str = "raise"):
        num_params, center = resolve_dims(num_params, center)
        super().__init__(num_params, population_size, seed, noise, nonfinite)
        check_range("population_size", population_size,
                    population_size % 2 == 0 and population_size >= 2,
                    "an even number >= 2 (members come in symmetric pairs)")
        max_speed = 2 * lr if max_speed is None else max_speed
        for name, value, ok, allowed in (
                ("lr", lr, lr > 0, "> 0"), ("max_speed", max_speed, max_speed > 0, "> 0"),
                ("momentum", momentum, 0 <= momentum < 1, "in [0, 1)"),
                ("radius", radius, radius > 0, "> 0"), ("stdev_lr", stdev_lr, stdev_lr >= 0,
                                                        ">= 0"),
                ("stdev_max_change", stdev_max_change, 0 <= stdev_max_change < 1, "in [0, 1)"),
                ("center_episodes", center_episodes, center_episodes >= 0, ">= 0")):
            check_range(name, value, ok, allowed)
        self.lr, self.max_speed, self.momentum = float(lr), float(max_speed), float(momentum)
        self.stdev_lr, self.stdev_max_change = float(stdev_lr), float(stdev_max_change)
        self.center_episodes = center_episodes
        center = torch.zeros(num_params) if center is None else center
        self.state = PGPEState(center=center,
                               stdev=torch.full((num_params,), radius / math.sqrt(num_params)),
                               velocity=torch.zeros(num_params))

    def _scale(self) -> torch.Tensor:
        return self.state.stdev.clone()

    def _ask(self) -> Population:
        return self._pairs()

    def gradients(self, pop: Population, fitness: np.ndarray) -> tuple[torch.Tensor, ...]:
        """``(grad_mu, grad_sigma)`` of the module docstring for the members of ``pop``."""
        s, u = self.state, centered_ranks(fitness)
        grad_mu, grad_sigma = torch.zeros(self.num_params), torch.zeros(self.num_params)
        variance = s.stdev * s.stdev
        # A fixed-order sum: the same result whatever the number of threads.
        for j, genome in enumerate(pop.genomes[0::2]):
            eps = self.noise.slice(genome.seed, self.num_params) * s.stdev
            grad_mu.add_(eps, alpha=float(u[2 * j] - u[2 * j + 1]) / 2)
            grad_sigma.add_((eps * eps - variance) / s.stdev,
                            alpha=float(u[2 * j] + u[2 * j + 1]) / 2)
        pairs = len(fitness) // 2
        return grad_mu / pairs, grad_sigma / pairs

    def _tell(self, pop: Population, fitness: np.ndarray) -> tuple[dict, bool]:
        s = self.state
        grad_mu, grad_sigma = self.gradients(pop, fitness)
        s.velocity = clipup(s.velocity, grad_mu, self.lr, self.momentum, self.max_speed)
        s.center = s.center + s.velocity
        step = s.stdev + self.stdev_lr * grad_sigma
        change = s.stdev.abs() * self.stdev_max_change
        s.stdev = torch.minimum(torch.maximum(step, s.stdev - change), s.stdev + change)
        return {"stdev_mean": float(s.stdev.mean()), "speed": float(s.velocity.norm())}, True


@dataclass(frozen=True)
class PGPEParams(CenterParams):
    lr: float = param(0.01125, "> 0", lambda v: v > 0)  # ClipUp's step size for the centre
    # (EvoTorch's rl_clipup.py for MuJoCo: 0.75 * max_speed)
    max_speed: float = param(0.015, "> 0", lambda v: v > 0)  # ClipUp's largest step
    # (EvoTorch's rl_clipup.py for Walker2d and Humanoid: 0.015)
    momentum: float = param(0.9, "in [0, 1)", lambda v: 0 <= v < 1)  # ClipUp's momentum
    radius: float = param(0.225, "> 0", lambda v: v > 0)  # the initial |sigma|: each std
    # starts at radius / sqrt(D) (rl_clipup.py: 15 * max_speed)
    stdev_lr: float = param(0.1, ">= 0", lambda v: v >= 0)  # the stds' step size (0.1)
    stdev_max_change: float = param(0.2, "in [0, 1)", lambda v: 0 <= v < 1)  # the largest
    # relative change of a std per generation (EvoTorch: 0.2)


def from_config(p: PGPEParams, start: Start) -> PGPE:
    return PGPE(center=start.initial(), population_size=start.population, lr=p.lr,
                max_speed=p.max_speed, momentum=p.momentum, radius=p.radius,
                stdev_lr=p.stdev_lr, stdev_max_change=p.stdev_max_change,
                center_episodes=p.validation_episodes, seed=start.seed)


ALGORITHM = Algorithm(PGPE, PGPEParams, from_config, pbt=("lr", "max_speed", "stdev_lr"),
                      doc="PGPE with ClipUp (Sehnke et al. 2010; Toklu et al. 2020)")
