"""Hyperparameter sweeps on Ray Tune: grid, random or Optuna search over any config keys,
several seeds per point, FIFO, ASHA or population-based training; every trial a normal run
directory, on this machine or a Ray cluster.

Examples:
    python scripts/sweep.py sweeps/cartpole --algo es --set env.id=CartPole-v1 \\
        --grid algo.sigma=0.01,0.02,0.05 --grid algo.population=20,50 --seeds 0,1,2 \\
        --generations 10
    python scripts/sweep.py sweeps/asha --algo es --set env.id=Hopper-v5 --random 16 \\
        --range algo.sigma=log:0.005:0.1 --range algo.lr=log:0.003:0.03 \\
        --scheduler asha --generations 60
    python scripts/sweep.py sweeps/pbt --algo es --set env.id=Hopper-v5 --samples 4 \\
        --range algo.sigma=log:0.005:0.1 --range algo.lr=log:0.003:0.03 \\
        --scheduler pbt --pbt-interval 5 --generations 60

Every trial is neuroevo's training loop in a Tune trial process, writing the run directory
``OUT/runs/trial-NNNNN`` (``neuroevo resume/play/plot`` take it). Running the same command
again after an interruption (Ctrl-C, or even ``kill -9``) resumes the experiment from Tune's
state in ``OUT/tune``: finished trials are not rerun, interrupted ones continue from their
last checkpoint. ``OUT/summary.csv`` (swept values, seed, final score, frames, wall time,
status: finished, stopped early by the scheduler, or error) and ``OUT/summary.png`` come
from Tune's results. The score is ``--metric`` (default: the elite's or the centre's
validated score where the algorithm has one, else the best training episode) in the trial's
last row. ``--ray-address`` runs the trials on a Ray cluster (give paths on shared storage).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from neuroevo.errors import NeuroevoError
from neuroevo.optim import ALGORITHMS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("out", help="sweep directory (Tune's state, run dirs, summary.csv/png)")
    p.add_argument("--algo", required=True, help=" | ".join(ALGORITHMS))
    p.add_argument("--config", metavar="FILE.yaml", help="base config overrides")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed setting for every trial (repeatable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a swept key and its values (repeatable: the grid is their product)")
    p.add_argument("--range", action="append", default=[], metavar="KEY=lin|log|int:LO:HI",
                   help="a key drawn by the search (repeatable)")
    p.add_argument("--search", choices=("grid", "random", "optuna"),
                   help="default: random with --samples/--random, else grid")
    p.add_argument("--samples", type=int, metavar="N", help="points the search draws")
    p.add_argument("--random", type=int, metavar="N",
                   help="--search random --samples N")
    p.add_argument("--scheduler", default="fifo", choices=("fifo", "asha", "pbt"))
    p.add_argument("--pbt-interval", type=int, metavar="GENERATIONS",
                   help="PBT: generations between perturbations (default: budget / 10)")
    p.add_argument("--grace-period", type=int, metavar="N",
                   help="ASHA: the first rung, in the budget's unit (default: budget / 9)")
    p.add_argument("--metric", help="the score to rank trials by (default: the elite's or the "
                                    "centre's validated score, else fitness_max)")
    p.add_argument("--mode", default="max", choices=("max", "min"))
    p.add_argument("--sweep-seed", type=int, default=0, help="seed of the search and of PBT")
    p.add_argument("--seeds", default="0", help="run seeds per point, e.g. 0,1,2")
    p.add_argument("--generations", type=int, help="budget per trial")
    p.add_argument("--frames", type=int, help="budget per trial")
    p.add_argument("--cpus-per-trial", type=int, default=0,
                   help="0: from the engine's layout (engine.workers, else 1)")
    p.add_argument("--gpus-per-trial", type=float,
                   help="default: the cluster's GPUs shared over the trials its CPUs run")
    p.add_argument("--ray-address", default="", metavar="auto|HOST:PORT")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)

    def stop(signum, frame):
        raise KeyboardInterrupt

    def forward(signum, frame):  # SIGTERM and SIGHUP end the sweep as Ctrl-C does
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, stop)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        code = sweep(args, sys.argv[1:] if argv is None else argv)
    except NeuroevoError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        code = None
    if code is not None:
        return code
    print("\nsweep: interrupted; run the same command again to continue", file=sys.stderr)
    return 130


def sweep(args, argv) -> int | None:
    """The sweep's exit code, or None when it was interrupted."""
    from neuroevo.errors import ConfigError
    from neuroevo.sweep import summary, tuner
    from neuroevo.sweep.space import make_plan
    from neuroevo.sweep.trial import run_name, seed_of

    if args.random is not None and (args.samples is not None or args.search):
        raise ConfigError("--random N is --search random --samples N; give one of the two")
    search = "random" if args.random is not None else args.search
    plan = make_plan(args.algo, config=args.config and os.path.abspath(args.config),
                     sets=args.set, grid=args.grid, ranges=args.range, seeds=args.seeds,
                     generations=args.generations, frames=args.frames, search=search,
                     samples=args.random if args.random is not None else args.samples,
                     scheduler=args.scheduler, metric=args.metric, mode=args.mode,
                     pbt_interval=args.pbt_interval, grace_period=args.grace_period,
                     sweep_seed=args.sweep_seed)
    if args.cpus_per_trial < 0:
        raise ConfigError(f"--cpus-per-trial takes >= 0 (0: automatic), got "
                          f"{args.cpus_per_trial}")
    if args.gpus_per_trial is not None and not args.gpus_per_trial >= 0:
        raise ConfigError(f"--gpus-per-trial takes >= 0, got {args.gpus_per_trial}")
    cpus = args.cpus_per_trial or max(1, plan.base().engine.workers)
    out = os.path.abspath(args.out)
    print(f"sweep: {tuner.trials(plan)} trials ({plan.search} search, {plan.scheduler}, "
          f"{len(plan.seeds)} seeds, {cpus} CPUs each), ranked by {plan.metric} "
          f"({plan.mode}), in {args.out}", flush=True)

    def on_trial(result: dict | None, trial, error: bool) -> None:
        result = result or {}
        values = {k: trial.config.get(k) for k in plan.swept}
        score = result.get(plan.metric)
        print(f"sweep: {run_name(trial.trial_id)} {values} seed "
              f"{seed_of(plan, trial.config)} {summary.status(plan, result, error)}"
              + (f" at {result.get('frames', 0):,} frames, {plan.metric} {score:g}"
                 if score is not None else ""), flush=True)

    results, stopped = tuner.run(plan, out, cpus, args.gpus_per_trial, args.ray_address,
                                 on_trial, argv)
    if stopped:
        return None  # the next run writes the summary
    table = summary.rows(plan, results)
    summary.write(out, plan, table)
    failed = [r for r in table if r["status"] == "error"]
    top = summary.best(plan, table)
    if top is not None:
        print(f"sweep: best {plan.metric} {top['score']:g}: "
              f"{ {k: top[k] for k in plan.swept} } seed {top['seed']} ({top['run_dir']})")
    print(f"sweep: wrote {os.path.join(args.out, 'summary.csv')} and summary.png"
          + (f"; {len(failed)} trials failed (run the command again to retry them)"
             if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
