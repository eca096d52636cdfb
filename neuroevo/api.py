"""The Python entry point: ``neuroevo.train``."""

from __future__ import annotations

from neuroevo.config import Config, override
from neuroevo.dist import build_run
from neuroevo.loop import Budget, RunResult, generations


def train(cfg: Config | None = None, *, on_generation=None, on_episode=None, **overrides):
    """Build a run from ``cfg`` (plus dotted ``overrides`` such as ``algo__population=32``)
    and train until the budget is spent (one generation without one); returns a
    ``RunResult``. Example: ``train(algo__name="ga", env__game="pong", budget__generations=3)``.
    """
    cfg = cfg or Config()
    for key, value in overrides.items():
        override(cfg, key.replace("__", "."), value)
    built = build_run(cfg)
    budget = Budget.of(cfg)
    if budget.generations is None and budget.frames is None:
        budget.generations = 1
    result = RunResult(optimizer=built.optimizer, policy=built.policy, obs_norm=built.obs_norm)
    try:
        for row in generations(built.optimizer, built.evaluator, budget, on_episode=on_episode):
            result.history.append(row)
            if on_generation is not None:
                on_generation(row)
    finally:
        built.evaluator.close()
    return result
