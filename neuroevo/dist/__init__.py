"""Distribution as an adapter: where a run's episodes are evaluated when not in this process.

- ``replica``: the replica protocol (events, log, fingerprint), without any transport;
- ``session``: joining or starting Ray (the one module that imports ray);
- ``ray_backend``: ``RayEvaluator``, with the same ``evaluate(pop)`` call as the local
  evaluator, over actors made by a picklable replica factory (``neuroevo.build.Replicas``);
- sweeps (``neuroevo.sweep``) get Ray Tune from ``session.tune_module()``.

Nothing here imports an optimizer or the build (an import-linter contract checks it).
"""
