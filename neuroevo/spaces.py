"""An env's action space as the engine needs it: ``n`` discrete actions, ``nvec`` discrete
choices made together, or a box of bounds.

Envs describe theirs (``neuroevo.envs.env_spec``); the policy's output head reads it
(``neuroevo.policy.heads``). It sits below both so neither imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ActionSpace:
    n: int | None = None  # discrete: the number of actions (the network outputs one logit each)
    low: tuple[float, ...] | None = None  # box: per-dimension bounds (one output each)
    high: tuple[float, ...] | None = None
    nvec: tuple[int, ...] | None = None  # multi-discrete: dimension i chooses one of nvec[i]
    # (one logit each; gymnasium's MultiDiscrete, and MultiBinary as all 2s)

    def __post_init__(self):
        box = self.low is not None and self.high is not None
        kinds = (self.n is not None) + box + (self.nvec is not None)
        if (kinds != 1 or (box and len(self.low) != len(self.high))
                or (self.nvec is not None and (not self.nvec or min(self.nvec) < 1))):
            raise ValueError(f"an action space is n discrete actions, a nonempty nvec of "
                             f"choices or a box of equal-length bounds, got n={self.n}, "
                             f"nvec={self.nvec}, low={self.low}, high={self.high}")

    @property
    def discrete(self) -> bool:
        """One integer action (the argmax of the logits)."""
        return self.n is not None

    @property
    def box(self) -> bool:
        return self.low is not None

    @property
    def outputs(self) -> int:
        """Network outputs: one per discrete action or choice, or one per box dimension."""
        if self.discrete:
            return self.n
        return sum(self.nvec) if self.nvec is not None else len(self.low)

    @property
    def shape(self) -> tuple[int, ...]:
        """One env's action as the pools take it: ``()``, ``(len(nvec),)`` or ``(dims,)``."""
        if self.discrete:
            return ()
        return (len(self.nvec),) if self.nvec is not None else (len(self.low),)

    @property
    def dtype(self) -> type:
        return np.float32 if self.box else np.int32

    @classmethod
    def box_of(cls, low, high) -> ActionSpace:
        return cls(low=tuple(float(v) for v in np.ravel(low)),
                   high=tuple(float(v) for v in np.ravel(high)))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` float32 arrays of a box."""
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` uniformly random actions, as the pools take them."""
        if self.discrete:
            return rng.integers(0, self.n, count).astype(np.int32)
        if self.nvec is not None:
            return rng.integers(0, self.nvec, (count, len(self.nvec))).astype(np.int32)
        low, high = self.bounds()
        return rng.uniform(low, high, (count, len(low))).astype(np.float32)

    def arch(self) -> dict:
        """The space as a saved policy's ``arch`` records it (``from_arch`` reads it back)."""
        return {"num_outputs": self.outputs, "discrete": self.discrete,
                "nvec": None if self.nvec is None else list(self.nvec),
                "action_low": _finite(self.low) if self.box else None,
                "action_high": _finite(self.high) if self.box else None}

    @classmethod
    def from_arch(cls, arch: dict) -> ActionSpace:
        if arch["discrete"]:
            return cls(n=int(arch["num_outputs"]))
        if arch.get("nvec") is not None:  # policies saved before multi-discrete have no key
            return cls(nvec=tuple(int(v) for v in arch["nvec"]))
        low = [-math.inf if v is None else v for v in arch["action_low"]]
        return cls.box_of(low, [math.inf if v is None else v for v in arch["action_high"]])


def _finite(bounds: tuple[float, ...]) -> list[float | None]:
    """Bounds as strict JSON holds them: an infinite bound is null (no bound)."""
    return [v if math.isfinite(v) else None for v in bounds]
