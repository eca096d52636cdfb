"""Statistical parity of ``--sim warp`` with ``--sim native``: the same OpenAI-ES run (config,
seed, members, episode seeds, action noise) on both sims for a few generations, over seeds.

Run: python scripts/warp_parity.py [--tasks HalfCheetah-v5,Hopper-v5] [--seeds 0,1,2]
     [--generations 3] [--population 16] [--episode-cap 100] [--json FILE]

Each generation's population mean return and centre return are recorded for both sims; the
table gives, per task and generation, the mean over seeds of each sim and of their relative
difference (warp - native) / (|native| + 1), with the seeds' min and max. The two runs start
from the same members, but float32 physics moves each episode a little (chaotically on
HalfCheetah), the updates follow from those returns, and the runs drift apart: parity is a
band, not equality.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from neuroevo.build import build
from neuroevo.config import Config, override
from neuroevo.evaluation import Job
from neuroevo.files import atomic_write
from neuroevo.loop import merge_observations


def run(task: str, seed: int, sim: str, generations: int, population: int, cap: int):
    cfg = Config(seed=seed)
    for key, value in (("env.id", task), ("algo.name", "es"), ("net.name", "mlp"),
                       ("net.hidden", "64,64"), ("algo.population", population),
                       ("env.episode_cap", cap), ("engine.device", "cpu"), ("env.sim", sim)):
        override(cfg, key, value)
    built = build(cfg)
    rows = []
    try:
        for _ in range(generations):
            pop = built.optimizer.ask()
            centre = built.optimizer.center_population()
            jobs = [Job(pop)] + ([Job(centre)] if centre is not None else [])
            results = built.evaluator.evaluate(jobs)
            merge_observations(built.obs_norm, results[0])
            built.optimizer.tell(results[0].fitness, results[0].extras.get("bc"))
            rows.append({"mean": float(results[0].fitness.mean()),
                         "centre": float(results[1].fitness.mean()) if centre else None})
    finally:
        built.evaluator.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="HalfCheetah-v5,Hopper-v5")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--generations", type=int, default=3)
    p.add_argument("--population", type=int, default=16)
    p.add_argument("--episode-cap", type=int, default=100)
    p.add_argument("--json")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    out = {"config": vars(a), "runs": {}}
    for task in a.tasks.split(","):
        runs = {sim: [run(task, s, sim, a.generations, a.population, a.episode_cap)
                      for s in seeds] for sim in ("native", "warp")}
        out["runs"][task] = runs
        print(f"{task}: population mean return per generation, {len(seeds)} seeds")
        for g in range(a.generations):
            nat = np.array([r[g]["mean"] for r in runs["native"]])
            war = np.array([r[g]["mean"] for r in runs["warp"]])
            rel = (war - nat) / (np.abs(nat) + 1)
            print(f"  gen {g}: native {nat.mean():9.3f}  warp {war.mean():9.3f}  relative "
                  f"difference {rel.mean():+.4f} [{rel.min():+.4f}, {rel.max():+.4f}]")
    if a.json:
        atomic_write(a.json, json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
