"""Where an ES generation on a MuJoCo task spends its physics: the rounds of env steps by
how many envs were running, and what one env-step cost in each.

    python scripts/profile_mujoco_rounds.py --env Humanoid-v5 --threads 1,2 --json FILE

The protocol is ``bench_peers.py``'s (MLP 64-64, population 64, one episode per member, no
centre episodes, the default layout) with ``engine.env_threads`` set to each of
``--threads``, in turn in this process, after one warm-up generation each. The physics
rounds are timed around ``MujocoSims.step_async`` and ``step_wait``, the rest of the
generation (the forward pass, resets, the driver's bookkeeping) is the remainder. Figures
of a machine doing nothing else only; rounds are not interleaved, so compare the threads
of one run by their shares, not by their seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.envs.mujoco import MujocoSims
from neuroevo.evaluation import evaluate_one
from neuroevo.loop import merge_observations

BINS = ((1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 64))


class RoundTimer:
    """Records each physics round's envs and wall time by wrapping ``MujocoSims``."""

    def __init__(self):
        self.envs: list[int] = []
        self.walls: list[float] = []
        self._start = 0.0
        self._async, self._wait = MujocoSims.step_async, MujocoSims.step_wait
        timer = self

        def step_async(sims, actions, envs, inline=False):
            timer.envs.append(len(envs))
            timer._start = time.perf_counter()
            return timer._async(sims, actions, envs, inline)

        def step_wait(sims):
            out = timer._wait(sims)
            timer.walls.append(time.perf_counter() - timer._start)
            return out

        MujocoSims.step_async, MujocoSims.step_wait = step_async, step_wait

    def clear(self) -> None:
        self.envs.clear()
        self.walls.clear()

    def close(self) -> None:
        """Put ``MujocoSims``' own methods back."""
        MujocoSims.step_async, MujocoSims.step_wait = self._async, self._wait


def profile(env: str, threads: int, generations: int, timer: RoundTimer) -> dict:
    cfg = Config()
    apply_sets(cfg, ["algo.name=es", f"env.id={env}", "algo.population=64", "net.name=mlp",
                     "net.hidden=64,64", "algo.validation_episodes=0", "engine.device=cpu",
                     f"engine.env_threads={threads}"])
    built = build(cfg)
    try:
        def generation() -> int:
            r = evaluate_one(built.evaluator, built.optimizer.ask())
            merge_observations(built.obs_norm, r)
            built.optimizer.tell(r.fitness)
            return r.frames

        generation()  # warm-up
        timer.clear()
        start = time.perf_counter()
        frames = sum(generation() for _ in range(generations))
        seconds = time.perf_counter() - start
    finally:
        built.evaluator.close()
    envs, walls = np.array(timer.envs), np.array(timer.walls)
    out = {"threads": threads, "seconds_per_generation": seconds / generations,
           "physics_per_generation": walls.sum() / generations,
           "steps_per_generation": envs.sum() / generations,
           "frames_per_generation": frames / generations,  # the evaluator's own count
           "rounds_per_generation": len(envs) / generations, "by_active_envs": []}
    for lo, hi in BINS:
        m = (envs >= lo) & (envs <= hi)
        if m.any():
            out["by_active_envs"].append({
                "active": f"{lo}-{hi}", "rounds": m.sum() / generations,
                "steps": envs[m].sum() / generations, "wall": walls[m].sum() / generations,
                "us_per_env_step": walls[m].sum() / envs[m].sum() * 1e6})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="Humanoid-v5")
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--generations", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args(argv)
    timer = RoundTimer()
    results = []
    for threads in args.threads:
        r = profile(args.env, threads, args.generations, timer)
        results.append(r)
        print(f"{args.env}, {threads} simulator thread(s): {r['seconds_per_generation']:.3f} s "
              f"a generation, physics {r['physics_per_generation']:.3f} s, "
              f"{r['steps_per_generation']:,.0f} steps in {r['rounds_per_generation']:.0f} rounds")
        for b in r["by_active_envs"]:
            print(f"  {b['active']:>6} envs running: {b['rounds']:5.0f} rounds, "
                  f"{b['steps']:7,.0f} steps, {b['wall']:.3f} s, "
                  f"{b['us_per_env_step']:5.0f} us an env-step")
    timer.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": args.env, "generations": args.generations,
                       "time": time.strftime("%Y-%m-%d %H:%M"), "runs": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
