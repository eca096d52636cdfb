"""Record the regression fixtures: metrics.jsonl of short GA, ES and RS runs on CartPole, a
MuJoCo task and an Atari game, each at 2 driver threads, from the CLI.

Run: python scripts/record_regression.py [--out tests/regression/fixtures] [--only NAME ...]

tests/regression/test_fixtures.py runs the same commands and compares each row with the
recorded one, the timing fields (wall time, fps, stage seconds, occupancy) left out: bit for
bit on a machine like the one that recorded them (``machine.json``: the CPU, torch's CPU
kernels and the numeric libraries' versions), and elsewhere to ``REL`` in the floats, since
float32 reductions (torch's AVX2 and AVX-512 kernels sum in different orders) and MuJoCo's
physics differ in their last bits from one CPU to another. Record once, before a refactor
that must not change results (issue 32), and commit the files; re-record only for a change
that is meant to change results or for another machine, and say so in its commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile

from neuroevo.cli import main as cli

TIMING = frozenset({"wall_time", "fps", "timings", "occupancy"})
REL = 1e-6  # float fields on another machine: its CPUs' last bits, not a changed result
COMMON = ["--seed", "3", "--device", "cpu", "--no-progress", "--set", "engine.workers=2",
          "--set", "algo.test_episodes=2", "--set", "algo.test_every=2"]
ENVS = {
    "cartpole": ["--env", "CartPole-v1", "--population", "12", "--generations", "3",
                 "--episode-cap", "200", "--set", "env.test_episode_cap=200"],
    "hopper": ["--env", "Hopper-v5", "--population", "10", "--generations", "2",
               "--episode-cap", "60", "--set", "env.test_episode_cap=60"],
    "breakout": ["--game", "breakout", "--population", "8", "--generations", "2",
                 "--episode-cap", "60", "--set", "env.test_episode_cap=60"],
}
GA_RS = ["--set", "algo.elite_candidates=2", "--set", "algo.validation_episodes=2",
         "--set", "algo.train_episodes=1"]  # recorded before the key: one, as on Atari now 2
CASES = {f"{algo}-{env}": [algo, *args, *COMMON, *(GA_RS if algo != "es" else
                                                  ["--set", "algo.validation_episodes=2"])]
         for env, args in ENVS.items() for algo in ("ga", "es", "rs")}


def run(name: str, workdir: str) -> str:
    """Train case ``name`` through the CLI in ``workdir``; the path of its metrics.jsonl."""
    run_dir = os.path.join(workdir, name)
    code = cli(["run", *CASES[name], "--run-dir", run_dir])
    if code != 0:
        raise RuntimeError(f"{name}: neuroevo run exited {code}")
    return os.path.join(run_dir, "metrics.jsonl")


def machine() -> dict:
    """What decides the last bits of a run's floats."""
    import mujoco
    import numpy
    import torch

    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    return {"cpu": cpu, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__, "numpy": numpy.__version__,
            "mujoco": mujoco.__version__}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("tests", "regression", "fixtures"))
    p.add_argument("--only", nargs="*", default=sorted(CASES))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            shutil.copyfile(run(name, tmp), os.path.join(args.out, f"{name}.jsonl"))
            print("recorded", name, flush=True)
    with open(os.path.join(args.out, "machine.json"), "w") as f:
        json.dump(machine(), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
