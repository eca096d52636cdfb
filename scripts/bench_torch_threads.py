"""One driver thread on a CPU: its forward passes on one torch thread or on torch's default,
side by side, on a quiet machine and beside a busy process (issue 17).

    python scripts/bench_torch_threads.py --json experiments/bench/cpu-torch-threads.json

Each case is ``engine.workers=1`` (what ``neuroevo run`` picks for a population under 16 on
this CPU, and what a user may set), its generations timed with the evaluator's forward
passes on ``--threads`` (default: 1, what ``make_evaluator`` gives a CPU driver, and torch's
default, what a lone driver had before), rounds interleaved, each figure its
best round. ``busy`` runs the same rounds beside a process at nice 19 that keeps one core
busy, as a second run or any other job on a shared machine does. Frames per second (env steps
for MuJoCo, emulator frames for Atari).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch

from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.files import atomic_write
from neuroevo.loop import Totals, one_generation

CASES = {  # name -> --set items
    "hopper-mlp64": ["algo.name=es", "env.id=Hopper-v5", "net.hidden=64,64",
                     "algo.population=40"],
    "halfcheetah-mlp256": ["algo.name=es", "env.id=HalfCheetah-v5", "algo.population=32"],
    "pong-small": ["algo.name=ga", "env.game=pong", "net.name=small", "algo.population=8",
                   "env.episode_cap=500"],
}
BUSY = "import os; os.nice(19)\nwhile True: pass"


def measure(built, seconds: float) -> float:
    """Frames per second over whole generations for about ``seconds``."""
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        totals = Totals()
        one_generation(built.optimizer, built.evaluator, totals, obs_norm=built.obs_norm)
        frames += totals.frames
    return frames / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", default=f"1,{torch.get_num_threads()}")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    if unknown:
        ap.error(f"--cases: unknown case {unknown[0]!r}; choose from {', '.join(CASES)}")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"--threads takes whole numbers separated by commas, got {args.threads!r}")
    if min(threads) < 1:
        ap.error(f"--threads takes counts >= 1, got {args.threads!r}")
    out: dict = {"machine": platform.processor() or platform.machine(),
                 "cpu_count": os.cpu_count(), "default_torch_threads": torch.get_num_threads(),
                 "seconds": args.seconds, "rounds": args.rounds, "cases": {}}
    for name in args.cases.split(","):
        cfg = Config()
        apply_sets(cfg, [*CASES[name], "engine.device=cpu", "engine.workers=1",
                         "algo.validation_episodes=0"])
        built = build(cfg)
        one_generation(built.optimizer, built.evaluator, Totals(),  # warm-up
                       obs_norm=built.obs_norm)
        best: dict = {}
        for _ in range(args.rounds):
            for load in ("quiet", "busy"):
                busy = (subprocess.Popen([sys.executable, "-c", BUSY]) if load == "busy"
                        else None)
                try:
                    for t in threads:
                        built.evaluator.torch_threads = t
                        key = f"{load}_threads{t}_fps"
                        best[key] = max(best.get(key, 0.0), measure(built, args.seconds))
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
        built.evaluator.close()
        out["cases"][name] = {k: round(v, 1) for k, v in best.items()}
        print(name, json.dumps(out["cases"][name]), flush=True)
    if args.json:
        atomic_write(args.json, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
