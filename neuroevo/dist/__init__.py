"""Backends: where a run's episodes are evaluated. ``local`` is the pipelined evaluator of
``neuroevo.engine`` in this process; ``ray`` spreads it over Ray actors (``ray_backend``,
the only module that imports ray). Both have the same ``evaluate(pop)`` call.
"""

from __future__ import annotations

from neuroevo.build import Built, build
from neuroevo.config import Config, check


def build_run(cfg: Config) -> Built:
    """``build(cfg)`` with the evaluator of ``cfg.engine.backend``."""
    check(cfg)  # before Ray starts
    e = cfg.engine
    if e.backend == "local":
        return build(cfg)
    from neuroevo.dist.ray_backend import RayEvaluator

    built = build(cfg, local=False)
    built.evaluator = RayEvaluator(built.config, built.optimizer, built.obs_norm, actors=e.ray_actors,
                                   address=e.ray_address, timeout=e.ray_timeout)
    return built
