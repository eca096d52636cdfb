"""Hyperparameter sweeps on Ray Tune (``scripts/sweep.py``; ``experiments/sweeps/``).

``space`` checks what a sweep explores (``Plan``), ``trial`` is the Tune trainable that runs
neuroevo's loop into a run directory, ``tuner`` builds and resumes the Tune experiment, and
``summary`` writes ``summary.csv`` and ``summary.png`` from Tune's results.
"""

from neuroevo.sweep.space import Plan, make_plan
from neuroevo.sweep.trial import Trial, run_name

__all__ = ["Plan", "Trial", "make_plan", "run_name"]
