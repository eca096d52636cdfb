"""How long novelty takes beside a generation (issue 34): the archive's k-nearest-neighbour
step for a population against an archive, and its share of a generation's wall time; and
the whole engine's frames/s running NSR-ES against OpenAI-ES.

    python scripts/bench_novelty.py                      # archive 10,000, population 1,000
    python scripts/bench_novelty.py --archive 10000 --population 1000 --dims 2 --repeat 5
    python scripts/bench_novelty.py --engine HalfCheetah-v5 --seconds 30 --rounds 3
    python scripts/bench_novelty.py --engine breakout --population 64 --seconds 60 --rounds 2

It times ``neuroevo.optim.novelty.novelty`` (NS-ES, NSR-ES, NSRA-ES: a population against the
archive) and ``population_novelty`` (GA-NS: the archive plus the population), the median of
``--repeat`` calls, and sets them against the wall time of one generation of that many
episodes at a measured rate (``--steps-per-second``, env steps of the whole engine, and
``--episode-steps``; defaults: HalfCheetah-v5 on this 2-core CPU, experiments/bench).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from neuroevo.optim.novelty import novelty, population_novelty


def timed(fn, repeat: int) -> float:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def engine_ratio(env: str, population: int, seconds: float, rounds: int) -> dict:
    """Whole generations of OpenAI-ES and NSR-ES on ``env`` (the same net, population and
    layout), in alternating rounds in this one process, after one generation of each off
    the clock (a long run's steady state); each figure is its best round, and
    ``round_ratios`` are each round's NSR-ES / ES."""
    from neuroevo.bench import engine_rate
    from neuroevo.build import build
    from neuroevo.config import Config, override
    from neuroevo.envs.atari import games

    built = {}
    where = "env.game" if env in games() else "env.id"  # an Atari game: its RAM (atari_ram)
    for algo in ("es", "nsres"):
        cfg = Config()
        for key, value in {"algo.name": algo, where: env, "algo.population": population,
                           "engine.device": "cpu"}.items():
            override(cfg, key, value)
        built[algo] = build(cfg)
    best = {algo: 0.0 for algo in built}
    ratios = []
    try:
        for r in range(rounds):
            rate = {algo: engine_rate(b, seconds, warmup=r == 0)[0] for algo, b in built.items()}
            ratios.append(rate["nsres"] / rate["es"])
            best = {algo: max(best[algo], rate[algo]) for algo in built}
    finally:
        for b in built.values():
            b.evaluator.close()
    return {"env": env, "population": population, "seconds": seconds, "rounds": rounds,
            "es_fps": round(best["es"]), "nsres_fps": round(best["nsres"]),
            "nsres_over_es": round(best["nsres"] / best["es"], 3),
            "round_ratios": [round(x, 3) for x in ratios]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", type=int, default=10_000)
    p.add_argument("--population", type=int, default=1_000)
    p.add_argument("--dims", type=int, default=2)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--steps-per-second", type=float, default=14_000.0)
    p.add_argument("--episode-steps", type=int, default=1_000)
    p.add_argument("--engine", metavar="ENV", help="measure the engine's frames/s with "
                   "NSR-ES against OpenAI-ES on this env instead")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.engine:
        print(json.dumps(engine_ratio(args.engine, args.population, args.seconds,
                                      args.rounds), indent=1))
        return
    rng = np.random.default_rng(0)
    archive = torch.as_tensor(rng.normal(size=(args.archive, args.dims)))
    bcs = rng.normal(size=(args.population, args.dims))
    ns = timed(lambda: novelty(archive, bcs, args.k), args.repeat)
    ga_ns = timed(lambda: population_novelty(archive, bcs, args.k), args.repeat)
    generation = args.population * args.episode_steps / args.steps_per_second
    out = {"archive": args.archive, "population": args.population, "dims": args.dims,
           "k": args.k, "torch_threads": torch.get_num_threads(),
           "novelty_seconds": round(ns, 5), "population_novelty_seconds": round(ga_ns, 5),
           "generation_seconds": round(generation, 2),
           "novelty_share": round(ns / generation, 5),
           "population_novelty_share": round(ga_ns / generation, 5)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
