"""A sweep's trial: a Ray Tune function trainable that runs neuroevo's training loop in its
own process, through the same factory as ``neuroevo run`` (``build_run``), into a normal run
directory (``OUT/runs/trial-NNNNN``: ``neuroevo resume``, ``play`` and ``plot`` take it).

Every finished row is reported to Tune, every few with the run's own checkpoint: Tune's
checkpoint of a trial is a copy of ``checkpoint/state.safetensors``, so Tune can
resume a trial after the sweep was killed and PBT can exploit one: a trial restored from a
checkpoint rewrites its run directory from it (as ``neuroevo resume`` rewrites the metric
files from the checkpoint) with its own config, which for PBT holds the explored values.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from neuroevo.build import build_run, fit_to_cpus
from neuroevo.checkpoint import Checkpoints, RunDir, finite
from neuroevo.config import keys
from neuroevo.dist.session import tune_module
from neuroevo.loop import Budget, Callback, Tests, Totals, generations
from neuroevo.sweep.space import Plan

STAGING = ".tune-checkpoint"  # in the run directory: what the next report hands to Tune
KEYS = set(keys())
LOCK_WAIT = 60.0  # seconds a restarted trial waits for the process it replaces to exit


@dataclass(frozen=True)
class Trial:
    """The trainable: ``Trial(plan, out, cpus)(config)`` runs the trial whose swept values
    are the config keys in Tune's ``config`` (``{"algo.sigma": 0.02, "seed": 0}``) on top of
    ``plan``'s base config and budget. It is picklable; ``tune.with_parameters`` ships it."""

    plan: Plan
    out: str  # the sweep directory, absolute
    cpus: int  # the CPUs Tune gives each trial: the engine's automatic layout uses these
    checkpoint_every: int = 1  # report a checkpoint every this many rows (and the last)

    def __call__(self, config: dict) -> None:
        tune = tune_module()
        trial_id = tune.get_context().get_trial_id()
        values = {k: v for k, v in config.items() if k in KEYS and k != "seed"}
        cfg = self.plan.trial_config(values, seed_of(self.plan, config))
        fit_to_cpus(cfg, self.cpus)
        run_dir = RunDir(os.path.join(self.out, "runs", run_name(trial_id)))
        built = build_run(cfg)
        budget = Budget.of(built.config)
        try:
            share = tune.get_context().get_trial_resources().required_resources
            layout = {**built.layout(), "trial_resources": dict(share)}  # Tune's share
            totals, history = _start(run_dir, built, layout, tune.get_checkpoint())
            report = Report(tune, run_dir, budget, self.checkpoint_every)
            generations(built.optimizer, built.evaluator, budget, totals,
                        history, [Checkpoints(run_dir, built), report],
                        tests=Tests.of(built.config), obs_norm=built.obs_norm)
            if not report.reported and history:  # restored after its last row: say it again
                report.generation(history[-1], totals, history)
        finally:
            built.evaluator.close()
            run_dir.unlock()


def seed_of(plan: Plan, config: dict) -> int | None:
    """A trial's run seed: Tune's ``seed``, or with Optuna's ``Repeater`` the seed at the
    repeat's index."""
    if "__trial_index__" in config:
        return plan.seeds[config["__trial_index__"]]
    return config.get("seed")


def run_name(trial_id: str) -> str:
    """``trial-00003`` for Tune's trial id ``a1b2c_00003``."""
    return f"trial-{trial_id.rsplit('_', 1)[-1]}"


def _start(run_dir: RunDir, built, layout: dict, checkpoint) -> tuple[Totals, list[dict]]:
    """Make ``run_dir`` hold this trial's start: a new run, or the state of a Tune checkpoint
    (this trial's own, or for PBT another's) under this trial's config, written as
    ``neuroevo resume`` writes it (``run.json`` keeps every session, with its ``layout``)."""
    if checkpoint is None:
        run_dir.lock(wait=LOCK_WAIT)
        run_dir.create(built.config, force=True)  # a trial that starts again starts clean
        run_dir.record_layout(layout, 0)
        return Totals(), []
    with checkpoint.as_directory() as d:
        state = RunDir(d).load()  # the explored config is another run: no identity check
    built.restore(state)
    totals, history = state["totals"], state["history"]
    run_dir.lock(wait=LOCK_WAIT)
    run_dir.remove_temporaries()
    os.makedirs(run_dir.folder("checkpoint"), exist_ok=True)
    run_dir.write_config(built.config)
    run_dir.save(built.config, built.optimizer, totals, history, built.policy, built.obs_norm,
                 built.arch)
    run_dir.record_layout(layout, totals.generation)
    return totals, history


class Report(Callback):
    """Reports each finished row to Tune (its numeric keys, ``generations`` done and
    ``final``: 1 once the budget is spent), with the run's checkpoint every ``every`` rows
    and at the end."""

    def __init__(self, tune, run_dir: RunDir, budget: Budget, every: int):
        self.tune, self.run_dir = tune, run_dir
        self.budget, self.every, self.reported = budget, every, False

    def generation(self, row: dict, totals: Totals, history: list[dict]) -> None:
        metrics = {k: v for k, v in finite(row).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        metrics["generations"] = row["generation"] + 1
        # The state is spent from the row before the last for ES (its checkpoint holds the
        # last generation, pending): PBT exploits neither row, nothing would train after.
        final = self.budget.spent(totals)
        metrics["final"] = int(final)
        self.reported = True
        if not ((final and row is history[-1] and totals.pending is None)
                or metrics["generations"] % self.every == 0):
            self.tune.report(metrics)
            return
        d = self.run_dir.file(STAGING)  # one folder, emptied each time: a kill leaks none
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "checkpoint"))
        target = os.path.join(d, "checkpoint", "state.safetensors")
        try:  # the run's file is replaced, never rewritten in place: a link is a snapshot
            os.link(self.run_dir.checkpoint, target)
        except OSError:
            shutil.copyfile(self.run_dir.checkpoint, target)
        try:  # Tune copies it into OUT/tune before returning (or stops the trial in there)
            self.tune.report(metrics, checkpoint=self.tune.Checkpoint.from_directory(d))
        finally:
            shutil.rmtree(d, ignore_errors=True)
