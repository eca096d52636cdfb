"""How long novelty takes beside a generation (issue 34): the archive's k-nearest-neighbour
step for a population against an archive, and its share of a generation's wall time.

    python scripts/bench_novelty.py                      # archive 10,000, population 1,000
    python scripts/bench_novelty.py --archive 10000 --population 1000 --dims 2 --repeat 5

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", type=int, default=10_000)
    p.add_argument("--population", type=int, default=1_000)
    p.add_argument("--dims", type=int, default=2)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--steps-per-second", type=float, default=14_000.0)
    p.add_argument("--episode-steps", type=int, default=1_000)
    args = p.parse_args()
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
