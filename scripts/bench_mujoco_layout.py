"""One CPU driver against one per core for OpenAI-ES on MuJoCo, side by side (issue 17).

    python scripts/bench_mujoco_layout.py --tasks HalfCheetah-v5,Hopper-v5 --hidden 64,64 \
        --rounds 2 --json experiments/bench/cpu-mujoco-one-driver.json

Each measurement is a fresh process that builds ES as ``neuroevo run es`` does, with
``engine.workers`` set to each layout in turn (rounds alternated), and times
``--generations`` generations after a warm-up: env steps/s, and each stage's seconds summed
over the drivers. The figure of a layout is its best round; the ratio is one driver over
one per core.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROGRAM = r"""
import json, sys, time
from neuroevo.build import build
from neuroevo.config import Config, apply_sets
task, hidden, workers, generations = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = Config()
apply_sets(cfg, ["algo.name=es", f"env.id={task}", "algo.population=64", "net.name=mlp",
                 f"net.hidden={hidden}", "algo.validation_episodes=0", "engine.device=cpu",
                 f"engine.workers={workers}"])
built = build(cfg)

def generation():
    r = built.evaluator.evaluate(built.optimizer.ask())
    built.optimizer.tell(r.fitness)
    return r

generation()  # warm-up
start = time.perf_counter()
results = [generation() for _ in range(generations)]
seconds = time.perf_counter() - start
timings = {}
for r in results:
    for k, v in r.timings.items():
        timings[k] = timings.get(k, 0.0) + v
print(json.dumps({"steps_per_s": sum(r.frames for r in results) / seconds, "timings": timings}))
built.evaluator.close()
"""


def measure(task: str, hidden: str, workers: int, generations: int) -> dict:
    out = subprocess.run([sys.executable, "-c", PROGRAM, task, hidden, str(workers),
                          str(generations)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"bench_mujoco_layout: {task} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


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
                rounds[name].append(measure(task, args.hidden, workers, args.generations))
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
