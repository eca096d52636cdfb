"""One CPU driver against one per core for OpenAI-ES on MuJoCo, side by side (issue 17).

    python scripts/bench_mujoco_layout.py --tasks HalfCheetah-v5,Hopper-v5 --hidden 64,64 \
        --rounds 2 --json experiments/bench/cpu-mujoco-one-driver.json

Each measurement is ``bench_peers.py``'s neuroevo side (a fresh process that builds ES as
``neuroevo run es`` does and times ``--generations`` generations after a warm-up) with
``engine.workers`` set to each layout in turn, rounds alternated: env steps/s, and each
stage's seconds summed over the drivers. The figure of a layout is its best round; the
ratio is one driver over one per core.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench_peers import neuroevo_run  # scripts/ is on sys.path when a script runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="HalfCheetah-v5,Hopper-v5,Humanoid-v5")
    ap.add_argument("--hidden", default="64,64")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.generations < 1:
        ap.error("--rounds and --generations must be >= 1")
    cores = len(os.sched_getaffinity(0))
    layouts = {"one_driver": 1, "per_core": cores}
    report = {"machine": f"{os.uname().machine}, {cores} cores", "hidden": args.hidden,
              "population": 64, "generations": args.generations, "tasks": {}}
    for task in args.tasks.split(","):
        rounds = {name: [] for name in layouts}
        for k in range(args.rounds):
            print(f"{task}: round {k + 1}/{args.rounds}", file=sys.stderr)
            for name, workers in layouts.items():
                rounds[name].append(neuroevo_run(
                    task, 64, args.generations,
                    [f"net.hidden={args.hidden}", f"engine.workers={workers}"]))
        best = {name: max(rs, key=lambda r: r["steps_per_s"]) for name, rs in rounds.items()}
        ratio = best["one_driver"]["steps_per_s"] / best["per_core"]["steps_per_s"]
        report["tasks"][task] = {"best": best, "ratio": ratio, "rounds": rounds}
        print(f"{task:<16} one driver {best['one_driver']['steps_per_s']:>9,.0f}  per core "
              f"{best['per_core']['steps_per_s']:>9,.0f} steps/s  ratio {ratio:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
