"""The Python entry point: ``neuroevo.train``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from neuroevo.build import build_run
from neuroevo.config import Config, override
from neuroevo.loop import Budget, Callback, RunResult, Tests, generations


class _Hooks(Callback):
    def __init__(self, on_generation: Callable | None, on_episode: Callable | None):
        self.on_generation, self.on_episode = on_generation, on_episode

    def episode(self, done: int, total: int, score: float, frames: int) -> None:
        if self.on_episode is not None:
            self.on_episode(done, total, score, frames)

    def generation(self, row: dict, totals, history: list[dict]) -> None:
        if self.on_generation is not None:
            self.on_generation(row)


def train(cfg: Config | None = None, *, callbacks: Sequence[Callback] = (),
          on_generation: Callable | None = None, on_episode: Callable | None = None,
          behaviour: Callable | None = None, **overrides) -> RunResult:
    """Build a run from ``cfg`` (plus dotted ``overrides`` such as ``algo__population=32``)
    and train it with the CLI's driver (``neuroevo.loop.generations``) and defaults (no
    budget: ``DEFAULT_GENERATIONS``) until the budget is spent; returns a ``RunResult``
    whose ``config`` is the resolved one. ``callbacks`` are ``neuroevo.loop.Callback``s;
    ``on_generation(row)`` and ``on_episode(done, total, score, frames)`` are shorthands.
    ``behaviour(final_observation) -> vector``: each episode's behaviour characterisation
    for novelty search and MAP-Elites (default: the env kind's own, e.g. the final (x, y)).
    Example: ``train(algo__name="ga", env__game="pong", budget__generations=3)``.
    """
    cfg = cfg or Config()
    for key, value in overrides.items():
        override(cfg, key.replace("__", "."), value)
    built = build_run(cfg, behaviour)
    result = RunResult(optimizer=built.optimizer, policy=built.policy, obs_norm=built.obs_norm,
                       config=built.config)
    try:
        generations(built.optimizer, built.evaluator, Budget.of(built.config),
                    history=result.history, tests=Tests.of(built.config),
                    callbacks=[*callbacks, _Hooks(on_generation, on_episode)],
                    obs_norm=built.obs_norm)
    finally:
        built.evaluator.close()
    return result
