"""Hyperparameter sweeps: a grid or random search over any config keys, several seeds per
point, each trial a normal run directory, run as Ray tasks (a laptop or a cluster).

Examples:
    python scripts/sweep.py sweeps/cartpole --algo es --set env.id=CartPole-v1 \\
        --grid algo.sigma=0.01,0.02,0.05 --grid algo.population=20,50 --seeds 0,1,2 \\
        --generations 10
    python scripts/sweep.py sweeps/sigma --algo ga \\
        --config experiments/configs/quick_cpu_atari.yaml --random 8 \\
        --range algo.sigma=log:0.001:0.01 --seeds 0,1 --frames 2000000

Every trial is ``neuroevo run ALGO ... --run-dir OUT/trial-XXX-seedS`` (its own config.yaml,
metrics, checkpoint). Restarting the same command skips trials that finished and resumes
the ones that were interrupted. At the end (and after every trial) it writes
``OUT/summary.csv`` (swept values, seed, final score, frames, wall time, run dir) and
``OUT/summary.png`` (final score against each swept value: mean and spread over seeds).
The final score is the last generation's elite score (GA/RS), centre score (ES) or, without
either, its best episode. ``--ray-address`` runs the trials on a Ray cluster (give paths on
shared storage); ``--cpus-per-trial`` sets how many run at once.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import signal
import sys

import numpy as np

from neuroevo.config import Config, apply_sets, check, load, override
from neuroevo.errors import ConfigError, NeuroevoError
from neuroevo.files import atomic_write
from neuroevo.loop import Budget, Totals


def parse_values(spec: str) -> tuple[str, list[str]]:
    if "=" not in spec:
        raise ConfigError(f"--grid takes key=v1,v2,..., got {spec!r}")
    key, values = spec.split("=", 1)
    return key, values.split(",")


def sample_range(spec: str, rng: np.random.Generator) -> tuple[str, str]:
    """``key=log:lo:hi`` / ``key=uniform:lo:hi`` / ``key=int:lo:hi`` -> one drawn value."""
    try:
        key, rest = spec.split("=", 1)
        kind, lo, hi = rest.split(":")
        lo, hi = float(lo), float(hi)
    except ValueError:
        raise ConfigError(f"--range takes key=log|uniform|int:lo:hi, got {spec!r}") from None
    if kind == "log":
        return key, f"{math.exp(rng.uniform(math.log(lo), math.log(hi))):.6g}"
    if kind == "uniform":
        return key, f"{rng.uniform(lo, hi):.6g}"
    if kind == "int":
        return key, str(int(rng.integers(int(lo), int(hi) + 1)))
    raise ConfigError(f"--range kind must be log, uniform or int, got {kind!r}")


def points(args) -> list[dict[str, str]]:
    if args.grid and args.random is not None:
        raise ConfigError("use --grid or --random, not both")
    if args.random is not None and args.random < 1:
        raise ConfigError(f"--random takes the number of points, >= 1, got {args.random}")
    if args.random and not args.range:
        raise ConfigError("--random N draws from --range key=log|uniform|int:lo:hi; give at "
                          "least one --range")
    if args.range and not args.random:
        raise ConfigError("--range goes with --random N (the number of points to draw)")
    if args.grid:
        grid = [parse_values(g) for g in args.grid]
        return [dict(zip([k for k, _ in grid], combo, strict=True))
                for combo in itertools.product(*[v for _, v in grid])]
    if args.random:
        rng = np.random.default_rng(args.sweep_seed)
        return [dict(sample_range(r, rng) for r in args.range) for _ in range(args.random)]
    raise ConfigError("give the values to sweep: --grid key=v1,v2 or --random N --range ...")


def check_point(point: dict, fixed: list[str], algo: str, base: str | None) -> None:
    """Every key and value must be a valid config setting, used by the run, before anything
    runs."""
    cfg = load(base) if base else Config()
    override(cfg, "algo.name", algo)
    apply_sets(cfg, fixed)
    for key, value in point.items():
        override(cfg, key, value)  # unknown keys get UnknownName with suggestions there
    check(cfg)


def trial_dir(out: str, index: int, seed: int) -> str:
    return os.path.join(out, f"trial-{index:03d}-seed{seed}")


def finished(run_dir: str, generations: int | None, frames: int | None) -> dict | None:
    """The last metrics row of a run whose budget is spent, else None."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError):
        return None
    if not rows:
        return None
    last = rows[-1]
    done = Budget(generations, frames).spent(Totals(last["generation"] + 1, last["frames"]))
    return last if done else None


def score(row: dict) -> float:
    for key in ("elite_score", "center_score", "fitness_max"):
        if row.get(key) is not None:
            return float(row[key])
    return float("nan")


def write_summary(out: str, table: list[dict], swept: list[str]) -> None:
    columns = [*swept, "seed", "score", "frames", "wall_time", "run_dir"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns)
    writer.writeheader()
    writer.writerows(table)
    atomic_write(os.path.join(out, "summary.csv"), buffer.getvalue())
    if not table:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(swept), figsize=(4.5 * len(swept), 3.6), squeeze=False)
    for ax, key in zip(axes[0], swept, strict=True):
        values = sorted({r[key] for r in table}, key=lambda v: (_number(v) is None, _number(v), v))
        scores = [[r["score"] for r in table if r[key] == v] for v in values]
        xs = [_number(v) if _number(v) is not None else i for i, v in enumerate(values)]
        for x, s in zip(xs, scores, strict=True):
            ax.scatter([x] * len(s), s, color="gray", alpha=0.5, s=12)
        ax.errorbar(xs, [np.mean(s) for s in scores], yerr=[np.std(s) for s in scores],
                    marker="o", capsize=4, label="mean +/- std over seeds and other keys")
        if all(_number(v) is not None for v in values) and min(xs) > 0 and \
                max(xs) / min(xs) >= 10:
            ax.set_xscale("log")
        if any(_number(v) is None for v in values):
            ax.set_xticks(xs, values)
        ax.set_xlabel(key)
        ax.set_ylabel("final score")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    atomic_write(os.path.join(out, "summary.png"), png.getvalue())


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("out", help="sweep directory (trial run dirs, summary.csv, summary.png)")
    p.add_argument("--algo", required=True, help="ga | es | rs")
    p.add_argument("--config", metavar="FILE.yaml", help="base config overrides")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed setting for every trial (repeatable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a swept key and its values (repeatable: the grid is their product)")
    p.add_argument("--random", type=int, metavar="N", help="N random points from --range")
    p.add_argument("--range", action="append", default=[], metavar="KEY=log|uniform|int:LO:HI")
    p.add_argument("--sweep-seed", type=int, default=0, help="seed of the random points")
    p.add_argument("--seeds", default="0", help="run seeds per point, e.g. 0,1,2")
    p.add_argument("--generations", type=int, help="budget per trial")
    p.add_argument("--frames", type=int, help="budget per trial")
    p.add_argument("--cpus-per-trial", type=int, default=1)
    p.add_argument("--ray-address", default="", metavar="auto|HOST:PORT")
    args = p.parse_args(argv)

    received = []

    def stop(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt  # SIGTERM and SIGHUP end the sweep as Ctrl-C does

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        code = sweep(args)
    except NeuroevoError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        received.append(signal.SIGINT)
    if not received:
        return code
    # Ray's wait may turn the interrupt into cancelled trials and return: the signal, not
    # the exception, says the sweep was stopped. Finished trials are kept.
    print("\nsweep: interrupted; run the same command again to continue", file=sys.stderr)
    return 130


def sweep(args) -> int:
    from neuroevo.dist.tasks import run_commands

    if args.generations is None and args.frames is None:
        raise ConfigError("give each trial a budget: --generations N or --frames N")
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set takes key=value, got {item!r}")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds takes integers like 0,1,2, got {args.seeds!r}") from None
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds takes distinct non-negative integers, got {args.seeds!r}")
    grid = points(args)
    for point in grid:
        check_point(point, args.set, args.algo, args.config)
    swept = list(grid[0])
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    plan = {"algo": args.algo, "config": args.config, "set": args.set, "points": grid,
            "seeds": seeds}
    previous = os.path.join(out, "sweep.json")
    if os.path.exists(previous):  # trials are matched by index: the plan must be the same
        with open(previous) as f:
            if json.load(f).get("plan") != plan:
                raise ConfigError(f"{args.out} holds a different sweep (other points, seeds or "
                                  "settings); give a new directory")
    atomic_write(previous, json.dumps({"argv": sys.argv[1:], "plan": plan}, indent=1))
    trials = [(i, point, seed) for i, point in enumerate(grid) for seed in seeds]
    budget = ([] if args.generations is None else ["--generations", str(args.generations)]) + \
        ([] if args.frames is None else ["--frames", str(args.frames)])
    table, todo = [], []
    for i, point, seed in trials:
        run_dir = trial_dir(out, i, seed)
        last = finished(run_dir, args.generations, args.frames)
        if last is not None:
            table.append(row_of(point, seed, last, run_dir))
            continue
        command = [sys.executable, "-m", "neuroevo", "run", args.algo, "--seed", str(seed),
                   *budget, "--run-dir", run_dir, "--resume", "--no-progress"]
        if args.config:
            command += ["--config", os.path.abspath(args.config)]
        for item in [*args.set, *(f"{k}={v}" for k, v in point.items())]:
            command += ["--set", item]
        todo.append(((i, point, seed, run_dir), command))
    print(f"sweep: {len(trials)} trials ({len(grid)} points x {len(seeds)} seeds), "
          f"{len(trials) - len(todo)} finished before, {len(todo)} to run", flush=True)
    failed = 0
    for k, code, err in run_commands([c for _, c in todo], args.cpus_per_trial,
                                     args.ray_address, os.getcwd()):
        (i, point, seed, run_dir) = todo[k][0]
        last = finished(run_dir, args.generations, args.frames)
        if code != 0 or last is None:
            failed += 1
            print(f"sweep: trial {i} seed {seed} failed: {err.strip().splitlines()[-1:]}",
                  file=sys.stderr, flush=True)
            continue
        table.append(row_of(point, seed, last, run_dir))
        print(f"sweep: trial {i} seed {seed} {point}: score {table[-1]['score']:g}", flush=True)
        write_summary(out, sorted(table, key=lambda r: r["run_dir"]), swept)
    write_summary(out, sorted(table, key=lambda r: r["run_dir"]), swept)
    print(f"sweep: wrote {os.path.join(out, 'summary.csv')} and summary.png"
          + (f"; {failed} trials failed (run the command again to retry them)" if failed else ""))
    return 1 if failed else 0


def row_of(point: dict, seed: int, last: dict, run_dir: str) -> dict:
    return {**point, "seed": seed, "score": score(last), "frames": last["frames"],
            "wall_time": round(last["wall_time"], 2), "run_dir": os.path.basename(run_dir)}


if __name__ == "__main__":
    sys.exit(main())
