"""Adam as in OpenAI's evolution-strategies-starter (``optimizers.py``), on flat tensors.

The bias correction is folded into the step size and epsilon is added to ``sqrt(v)``
uncorrected, which differs slightly from ``torch.optim.Adam``; we follow the paper's code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from neuroevo.schema import integer, tensor


@dataclass
class AdamState:
    m: torch.Tensor = field(metadata=tensor(("D",), torch.float32))
    v: torch.Tensor = field(metadata=tensor(("D",), torch.float32, "nonnegative"))
    t: int = field(default=0, metadata=integer(0))

    @classmethod
    def zeros(cls, num_params: int) -> AdamState:
        return cls(torch.zeros(num_params), torch.zeros(num_params), 0)


def adam_step(theta: torch.Tensor, grad: torch.Tensor, state: AdamState, lr: float,
              beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> torch.Tensor:
    """Return ``theta`` moved against ``grad`` (a loss gradient); updates ``state`` in place."""
    state.t += 1
    a = lr * math.sqrt(1 - beta2**state.t) / (1 - beta1**state.t)
    state.m.mul_(beta1).add_(grad, alpha=1 - beta1)
    state.v.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
    return theta - a * state.m / (state.v.sqrt() + eps)
