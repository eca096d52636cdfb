"""An env's action space as the engine needs it: ``n`` discrete actions, or a box of bounds.

Envs describe theirs (``neuroevo.envs.env_spec``); the policy's output head reads it
(``neuroevo.policy.heads``). It sits below both so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ActionSpace:
    n: int | None = None  # discrete: the number of actions (the network outputs one logit each)
    low: tuple[float, ...] | None = None  # box: per-dimension bounds (one output each)
    high: tuple[float, ...] | None = None

    def __post_init__(self):
        box = self.low is not None and self.high is not None
        if (self.n is None) == (not box) or (box and len(self.low) != len(self.high)):
            raise ValueError(f"an action space is n discrete actions or a box of equal-length "
                             f"bounds, got n={self.n}, low={self.low}, high={self.high}")

    @property
    def discrete(self) -> bool:
        return self.n is not None

    @property
    def outputs(self) -> int:
        """Network outputs: one per discrete action, or one per box dimension."""
        return self.n if self.discrete else len(self.low)

    @classmethod
    def box(cls, low, high) -> ActionSpace:
        return cls(low=tuple(float(v) for v in np.ravel(low)),
                   high=tuple(float(v) for v in np.ravel(high)))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` float32 arrays of a box."""
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)
