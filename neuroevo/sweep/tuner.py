"""A ``Plan`` run on Ray Tune: the search space, the search algorithm, the scheduler, and the
experiment in ``OUT/tune`` that the same command resumes (``Tuner.restore``).

- **Search.** ``grid``: every ``--grid`` value, once per seed. ``random``: ``samples`` points
  drawn from the ``--range``s (seeded by ``sweep_seed``), each run with every seed (Tune's
  ``constant_grid_search``: the seeds of a point share its values). ``optuna``: Optuna's TPE
  suggests ``samples`` points, each run once per seed (Tune's ``Repeater``, which tells
  Optuna the mean over the seeds).
  Optuna takes ``--grid`` keys as categorical choices.
- **Schedulers.** ``fifo`` runs every trial to its budget. ``asha`` stops the worst trials at
  rungs ``grace_period * 3**k`` (Li et al. 2020). ``pbt`` (Jaderberg et al. 2017), in
  Tune's synchronous form: every ``pbt_interval`` generations, when every trial has got
  there (trials take turns when the CPUs hold fewer), the bottom quarter continues from a
  top-quarter trial's checkpoint, with its ``--range`` values perturbed (x0.8 or x1.2, or
  with probability 0.25 drawn again) and kept in their ranges. The paper's asynchronous
  form exploits only a donor that was in the top quarter at its own last interval, which
  on a machine running fewer trials than the population is rarely the case.
- **Checkpoints.** Tune keeps every checkpoint a trial reports (deleting old ones races
  with its saved experiment state: a sweep killed then would resume a trial from a deleted
  checkpoint). A trial reports one every ``checkpoint_every`` generations and at its end.

Tune's own files (``OUT/tune``) are Ray's: Tune pickles its experiment state there and
unpickles it on resume, so resume only sweep directories you wrote. The run directories in
``OUT/runs`` hold no pickle.
"""

from __future__ import annotations

import json
import os
import random
import signal
import warnings

from neuroevo.checkpoint import RunDir
from neuroevo.dist.session import init, optuna_search, ray_module, shutdown, tune_module
from neuroevo.errors import ConfigError
from neuroevo.files import atomic_write, make_dirs, read_regular, storage_error
from neuroevo.serial import loads_strict
from neuroevo.sweep.space import Plan, Range
from neuroevo.sweep.trial import Trial

EXPERIMENT = "tune"  # OUT/tune: Tune's experiment


def domain(tune, r: Range):
    if r.kind == "log":
        return tune.loguniform(r.lo, r.hi)
    if r.kind == "int":
        return tune.randint(int(r.lo), int(r.hi) + 1)  # Tune's upper bound is exclusive
    return tune.uniform(r.lo, r.hi)


def param_space(tune, plan: Plan) -> dict:
    categorical = tune.choice if plan.search == "optuna" else tune.grid_search
    space = {key: categorical(list(values)) for key, values in plan.grid}
    space.update({r.key: domain(tune, r) for r in plan.ranges})
    if plan.search != "optuna":  # Optuna's seeds come from its Repeater
        space["seed"] = tune.grid_search(list(plan.seeds))
    return space


def search_alg(tune, plan: Plan):
    if plan.search == "optuna":
        searcher = optuna_search(metric=plan.metric, mode=plan.mode, seed=plan.sweep_seed)
        if len(plan.seeds) == 1:
            return searcher
        return tune.search.Repeater(searcher, repeat=len(plan.seeds), set_index=True)
    return tune.search.BasicVariantGenerator(constant_grid_search=True,
                                             random_state=plan.sweep_seed)


def scheduler(tune, plan: Plan):
    s = tune.schedulers
    if plan.scheduler == "asha":
        return s.ASHAScheduler(time_attr=plan.time_attr, max_t=plan.budget,
                               grace_period=plan.grace_period, reduction_factor=3)
    if plan.scheduler == "pbt":
        random.seed(plan.sweep_seed)  # PBT draws its explore steps from Python's random
        return _pbt(tune)(time_attr="generations", perturbation_interval=plan.pbt_interval,
                          hyperparam_mutations={r.key: domain(tune, r) for r in plan.ranges},
                          custom_explore_fn=_within(plan.ranges), synch=True)
    return s.FIFOScheduler()


def _within(ranges: tuple[Range, ...]):
    """PBT's explore step, kept in the ``--range``s (x1.2 would leave them)."""

    def clip(config: dict) -> dict:
        for r in ranges:
            value = min(max(config[r.key], r.lo), r.hi)
            config[r.key] = round(value) if r.kind == "int" else value
        return config

    return clip


def checkpoint_every(plan: Plan) -> int:
    """Generations between a trial's Tune checkpoints: PBT's interval (its exploits copy
    them), else about 20 in a budget of generations, every 5 in one of frames."""
    if plan.scheduler == "pbt":
        return plan.pbt_interval
    return max(1, plan.generations // 20) if plan.generations is not None else 5


def _pbt(tune):
    """Tune's synchronous PBT, with two changes.

    - No exploit at a trial's last rows: a trial whose budget is spent trains no more, so
      an exploit there would only relabel it with another trial's score.
    - No wait forever: when every waiting trial is already at the next sync point and none
      runs (a trial ended before it, or a resumed sweep, whose trials come back past the
      point its fresh scheduler expects), the sync point moves to the next multiple of the
      interval."""
    s, TuneTrial = tune.schedulers, tune.experiment.Trial

    class PBT(s.PopulationBasedTraining):
        def on_trial_result(self, tune_controller, trial, result):
            if result.get("final"):
                return s.TrialScheduler.CONTINUE
            return super().on_trial_result(tune_controller, trial, result)

        def choose_trial_to_run(self, tune_controller):
            chosen = super().choose_trial_to_run(tune_controller)
            trials = tune_controller.get_trials()
            waiting = [t for t in trials if t.status in (TuneTrial.PENDING, TuneTrial.PAUSED)]
            if chosen is None and waiting and not any(t.status == TuneTrial.RUNNING
                                                      for t in trials):
                latest = max(self._trial_state[t].last_train_time for t in waiting)
                interval = self._perturbation_interval
                self._next_perturbation_sync = (latest // interval + 1) * interval
                chosen = super().choose_trial_to_run(tune_controller)
            return chosen

    return PBT


def trials(plan: Plan) -> int:
    points = 1
    if plan.search != "optuna":  # Optuna draws grid keys as choices, within its samples
        for _, values in plan.grid:
            points *= len(values)
    return points * plan.samples * len(plan.seeds)


def run(plan: Plan, out: str, cpus_per_trial: int, gpus_per_trial: float | None,
        address: str = "", on_trial=None, argv=()):
    """Run (or, when ``OUT/tune`` holds it, resume) ``plan``; returns Tune's ``ResultGrid``
    and whether a signal stopped it first. ``on_trial(last_result, trial, error)`` hears
    each trial end."""
    _check_claim(out, plan)
    # Tune's tables and hints would bury the sweep's own lines (``on_trial``); its legacy
    # reporter at verbose 0 prints nothing.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune saves its experiment state (which checkpoint each trial has) every 10 s or more;
    # a sweep killed in between resumes its trials from older checkpoints.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    init(address)
    try:
        tune = tune_module()
        warnings.filterwarnings("ignore", "Consider boosting PBT")  # it needs reuse_actors
        cluster = ray_module().cluster_resources()
        if not address and cpus_per_trial > cluster.get("CPU", 0):
            raise ConfigError(f"--cpus-per-trial {cpus_per_trial} is more than this "
                              f"machine's {cluster.get('CPU', 0):g} CPUs; give at most that")
        gpus = _gpus(cluster, cpus_per_trial) if gpus_per_trial is None else gpus_per_trial
        if not address and gpus > cluster.get("GPU", 0):
            raise ConfigError(f"--gpus-per-trial {gpus:g} is more than this machine's "
                              f"{cluster.get('GPU', 0):g} GPUs; give at most that")
        _claim(out, plan, argv)
        trainable = tune.with_resources(
            tune.with_parameters(Trial(plan, out, cpus_per_trial, checkpoint_every(plan))),
            {"cpu": cpus_per_trial, "gpu": gpus})
        path = os.path.join(out, EXPERIMENT)
        if tune.Tuner.can_restore(path):
            tuner = tune.Tuner.restore(path, trainable, resume_unfinished=True,
                                       resume_errored=True)
        else:
            tuner = tune.Tuner(trainable, param_space=param_space(tune, plan),
                               tune_config=_tune_config(tune, plan),
                               run_config=_run_config(tune, plan, out, on_trial))
        with _GracefulStop() as stop:
            results = tuner.fit()
        return results, stop.received is not None
    finally:
        shutdown()


class _GracefulStop:
    """While Tune runs, SIGINT, SIGTERM and SIGHUP become Tune's own graceful stop (SIGUSR1:
    it saves the experiment state, stops the trials, which resume from their last reported
    checkpoint, and returns); which signal came is kept, since Tune returns as it does when
    the sweep is done. Before Tune listens, or at a second signal, the sweep stops at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self.received = None
        self.env = os.environ.get(_NO_SIGINT)
        os.environ[_NO_SIGINT] = "1"  # Tune's SIGINT handler would put ours aside
        self.previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def _handle(self, signum, frame):
        first, self.received = self.received is None, signum
        if first and signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None):
            signal.raise_signal(signal.SIGUSR1)
        else:
            raise KeyboardInterrupt

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        if self.env is None:
            os.environ.pop(_NO_SIGINT, None)
        else:
            os.environ[_NO_SIGINT] = self.env


_NO_SIGINT = "TUNE_DISABLE_SIGINT_HANDLER"


def _tune_config(tune, plan: Plan):
    reads = plan.scheduler != "fifo" or plan.search == "optuna"  # they read it every row
    return tune.TuneConfig(metric=plan.metric if reads else None,
                           mode=plan.mode if reads else None, search_alg=search_alg(tune, plan),
                           scheduler=scheduler(tune, plan),
                           num_samples=plan.samples * (len(plan.seeds)
                                                       if plan.search == "optuna" else 1),
                           reuse_actors=False)  # one process per trial: its own run-dir lock


def _run_config(tune, plan: Plan, out: str, on_trial):
    return tune.RunConfig(name=EXPERIMENT, storage_path=out, verbose=0,
                          checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
                          failure_config=tune.FailureConfig(max_failures=0),
                          callbacks=[_Lines(tune, on_trial)] if on_trial else None)


def _Lines(tune, on_trial):
    """A Tune callback that passes each trial's end to ``on_trial``."""

    class Lines(tune.Callback):
        def on_trial_complete(self, iteration, trials, trial, **info):
            on_trial(trial.last_result, trial, False)

        def on_trial_error(self, iteration, trials, trial, **info):
            on_trial(trial.last_result, trial, True)

    return Lines()


def _gpus(cluster: dict, cpus_per_trial: int) -> float:
    """The GPUs of the cluster shared out over the trials its CPUs run at once."""
    gpus, cpus = cluster.get("GPU", 0), cluster.get("CPU", 1)
    return 0 if not gpus else min(1.0, gpus * cpus_per_trial / cpus)


def _check_claim(out: str, plan: Plan) -> None:
    """``OUT/sweep.json`` says which experiment ``out`` holds: the same command resumes it,
    another is refused before anything is written."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"{out} is a file, not a sweep directory; give a directory")
    if RunDir(out).holds_run() or os.path.isdir(os.path.join(out, "checkpoint")):
        # a sweep writes its own files beside the run's (Tune's state, runs/, summary.*)
        raise ConfigError(f"{out} holds a neuroevo run (config.yaml or checkpoint/), not a "
                          "sweep; give a new directory for the sweep")
    path = os.path.join(out, "sweep.json")
    if not os.path.exists(path):
        if os.path.exists(os.path.join(out, EXPERIMENT)):
            raise ConfigError(f"{out} holds a Tune experiment that this script did not "
                              "start (no sweep.json); give a new directory")
        return
    try:
        held = loads_strict(read_regular(path)).get("plan")
    except (OSError, ValueError, AttributeError):
        held = None
    if held != plan.to_json():
        raise ConfigError(f"{out} holds a different sweep (other keys, values, seeds, "
                          "budget or settings); give a new directory")


def _claim(out: str, plan: Plan, argv) -> None:
    try:
        make_dirs(out)  # a path that cannot be made leaves no directories behind
    except OSError as e:
        raise storage_error("create", out, e) from None
    atomic_write(os.path.join(out, "sweep.json"),
                 json.dumps({"argv": list(argv), "plan": plan.to_json()}, indent=1))
