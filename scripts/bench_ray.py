"""The Ray backend against the local backend on the same workload, side by side in one run.

Run: python scripts/bench_ray.py [--game pong] [--net small] [--population 64]
     [--episode-cap 1000] [--actors 2] [--rounds 2] [--json FILE]

Both evaluate the same Deep GA populations (generation 0 and the ones after it) with the same
seeds, so they do the same episodes; Ray runs on a local instance of this machine with
``--actors`` actors. Each round evaluates one population locally, then on Ray (interleaved;
each figure is its best round). Reports frames/s, the ratio ray / local, and the bytes of the
driver <-> actor messages per population next to the size of one parameter vector.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

from neuroevo.build import build, ray_evaluator
from neuroevo.config import Config, override
from neuroevo.evaluation import evaluate_one
from neuroevo.files import atomic_write


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", default="pong")
    p.add_argument("--net", default="small")
    p.add_argument("--population", type=int, default=64)
    p.add_argument("--episode-cap", type=int, default=1000)
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args()
    cfg = Config()
    for key, value in {"algo.name": "ga", "env.game": args.game, "net.name": args.net,
                       "algo.population": args.population, "env.episode_cap": args.episode_cap,
                       "algo.elite_candidates": 0, "engine.device": "cpu"}.items():
        override(cfg, key, value)
    local, remote = build(cfg), build(cfg, local=False)
    ray_ev = ray_evaluator(remote, actors=args.actors)
    ray_ev.pids()  # start the actors before timing
    best = {"local": 0.0, "ray": 0.0}
    comm = 0
    for _ in range(args.rounds):
        pop, pop2 = local.optimizer.ask(), remote.optimizer.ask()
        a, b = evaluate_one(local.evaluator, pop), evaluate_one(ray_ev, pop2)
        assert (a.fitness == b.fitness).all(), "the backends disagree"
        best["local"] = max(best["local"], a.frames / a.wall_time)
        best["ray"] = max(best["ray"], b.frames / b.wall_time)
        comm = b.comm_bytes
        print(f"round: local {a.frames / a.wall_time:,.0f} frames/s, "
              f"ray {b.frames / b.wall_time:,.0f} frames/s, {comm:,} bytes", flush=True)
        local.optimizer.tell(a.fitness)
        remote.optimizer.tell(b.fitness)
    result = {"workload": vars(args), "local_fps": round(best["local"]),
              "ray_fps": round(best["ray"]),
              "ray_over_local": round(best["ray"] / best["local"], 3),
              "bytes_per_population": comm, "bootstrap_bytes": ray_ev.bootstrap_bytes,
              "param_vector_bytes": 4 * local.policy.spec.num_params,
              "machine": {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count()}}
    print(json.dumps(result, indent=1))
    local.evaluator.close()
    ray_ev.close()
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
