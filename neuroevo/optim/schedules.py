"""Sigma schedules: a value per generation, as small frozen dataclasses that configs can name."""

from __future__ import annotations

from dataclasses import dataclass

from neuroevo.errors import check_range


@dataclass(frozen=True)
class Constant:
    value: float

    def __post_init__(self):
        check_range("sigma", self.value, self.value > 0, "> 0")

    def __call__(self, generation: int) -> float:
        return self.value


@dataclass(frozen=True)
class Exponential:
    """``initial * decay**generation``, never below ``minimum``."""

    initial: float
    decay: float
    minimum: float = 0.0

    def __post_init__(self):
        check_range("sigma initial", self.initial, self.initial > 0, "> 0")
        check_range("sigma decay", self.decay, 0 < self.decay <= 1, "in (0, 1]")
        check_range("sigma minimum", self.minimum, 0 <= self.minimum <= self.initial,
                    "in [0, initial]")

    def __call__(self, generation: int) -> float:
        return max(self.initial * self.decay**generation, self.minimum)


@dataclass(frozen=True)
class Linear:
    """From ``initial`` to ``final`` over ``generations``, then constant at ``final``."""

    initial: float
    final: float
    generations: int

    def __post_init__(self):
        check_range("sigma initial", self.initial, self.initial > 0, "> 0")
        check_range("sigma final", self.final, self.final > 0, "> 0")
        check_range("sigma generations", self.generations, self.generations >= 1, ">= 1")

    def __call__(self, generation: int) -> float:
        frac = min(generation / self.generations, 1.0)
        return self.initial + frac * (self.final - self.initial)


def as_schedule(sigma) -> Constant | Exponential | Linear:
    """A float becomes ``Constant``; a schedule passes through."""
    if isinstance(sigma, (Constant, Exponential, Linear)):
        return sigma
    check_range("sigma", sigma, isinstance(sigma, (int, float)) and not isinstance(sigma, bool),
                "a positive number or a schedule from neuroevo.optim.schedules")
    return Constant(float(sigma))
