"""Backends: where a run's episodes are evaluated. ``local`` is the pipelined evaluator of
``neuroevo.engine`` in this process; ``ray`` spreads it over Ray actors (``ray_backend``,
the only module that imports ray). Both have the same ``evaluate(pop)`` call.
"""

from __future__ import annotations

from neuroevo.build import Built, build
from neuroevo.config import Config
from neuroevo.errors import check_range

BACKENDS = ("local", "ray")


def build_run(cfg: Config) -> Built:
    """``build(cfg)`` with the evaluator of ``cfg.engine.backend``."""
    e = cfg.engine
    check_range("engine.backend", e.backend, e.backend in BACKENDS, f"one of {BACKENDS}")
    check_range("engine.ray_actors", e.ray_actors, e.ray_actors >= 0, ">= 0")
    if e.backend == "local":
        return build(cfg)
    from neuroevo.dist.ray_backend import RayEvaluator

    built = build(cfg, local=False)
    built.evaluator = RayEvaluator(cfg, built.optimizer, built.obs_norm, actors=e.ray_actors,
                                   address=e.ray_address)
    return built
