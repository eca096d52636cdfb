"""Running observation normalisation, as in Salimans et al. 2017 (es_distributed ``RunningStat``).

Statistics are kept as sums so that workers can ship ``(sum, sumsq, count)`` and the driver
adds them: the whole population shares one normaliser, updated between generations from a
sample of rollouts. As in the authors' code the sums start at ``eps`` (1e-2) so an empty
normaliser is well defined, and the *variance* is floored at 1e-2 (std >= 0.1): REFERENCE's
"std floor 1e-2" is that floor. Normalised observations are clipped to +/- ``clip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from neuroevo import schema
from neuroevo.errors import CheckpointError, ConfigError, check_range


@dataclass
class Stats:
    """What a checkpoint holds of a normaliser (``ObsNorm.state_dict``)."""

    sum: torch.Tensor = field(metadata=schema.tensor(None, torch.float64))
    sumsq: torch.Tensor = field(metadata=schema.tensor(None, torch.float64, "nonnegative"))
    count: float = field(metadata=schema.real("positive"))


class ObsNorm:
    """``(obs - mean) / std`` clipped, from running float64 sums.

    >>> n = ObsNorm(2); n.update(torch.tensor([[1.0, 2.0], [3.0, 2.0]]))
    >>> n.mean
    tensor([1.9900, 1.9900], dtype=torch.float64)
    """

    def __init__(self, shape, eps: float = 1e-2, var_floor: float = 1e-2, clip: float = 5.0):
        self.shape = torch.Size([shape] if isinstance(shape, int) else shape)
        check_range("eps", eps, eps > 0, "> 0")
        check_range("var_floor", var_floor, var_floor >= 0, ">= 0")
        check_range("clip", clip, clip > 0, "> 0")
        self.var_floor, self.clip = var_floor, clip
        self.sum = torch.zeros(self.shape, dtype=torch.float64)
        self.sumsq = torch.full(self.shape, eps, dtype=torch.float64)
        self.count = eps

    @staticmethod
    def stats(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """``(sum, sumsq, count)`` of a ``[N, *shape]`` batch: what a worker ships."""
        obs = obs.to(torch.float64)
        return obs.sum(0), (obs * obs).sum(0), obs.shape[0]

    def increment(self, s: torch.Tensor, ssq: torch.Tensor, count: int) -> None:
        if tuple(s.shape) != tuple(self.shape) or tuple(ssq.shape) != tuple(self.shape):
            raise ConfigError(f"observation statistics must have shape {tuple(self.shape)}, "
                              f"got {tuple(s.shape)} and {tuple(ssq.shape)}")
        self.sum += s
        self.sumsq += ssq
        self.count += count

    def update(self, obs: torch.Tensor) -> None:
        self.increment(*self.stats(obs))

    @property
    def mean(self) -> torch.Tensor:
        return self.sum / self.count

    @property
    def std(self) -> torch.Tensor:
        return (self.sumsq / self.count - self.mean**2).clamp_min(self.var_floor).sqrt()

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return self.frozen(obs.device)(obs)

    def frozen(self, device):
        """The normalisation as it stands now, with its statistics on ``device`` once."""
        mean = self.mean.to(device, torch.float32)
        std = self.std.to(device, torch.float32)
        return lambda obs: ((obs - mean) / std).clamp(-self.clip, self.clip)

    def state_dict(self) -> dict:
        return {"sum": self.sum.clone(), "sumsq": self.sumsq.clone(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state_dict()``'s statistics, refused (``CheckpointError``) unless
        they are this normaliser's shape and finite, with a positive count."""
        stats = schema.build(Stats, state, {}, "the observation statistics")
        for name in ("sum", "sumsq"):
            if tuple(getattr(stats, name).shape) != tuple(self.shape):
                raise CheckpointError(f"the observation statistics' {name} has shape "
                                      f"{list(getattr(stats, name).shape)}, expected "
                                      f"{list(self.shape)}, the observations'")
        self.sum, self.sumsq, self.count = stats.sum, stats.sumsq, stats.count
