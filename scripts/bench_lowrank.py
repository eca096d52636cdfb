"""Low-rank populations against full rank and one shared network, side by side (issue 15).

    python scripts/bench_lowrank.py --json experiments/bench/cpu-lowrank-mlp.json

In one run, with rounds interleaved (each figure its best round), forward passes per second
(network rows per second) over ``--population`` rows of the policy ``neuroevo run es``
builds for ``--env`` (the paper's MLP 256-256 unless ``--hidden``) or ``--game`` (the
large net unless ``--net``; frames of random pixels):

- ``shared_fwd_per_s``: one network, a batch of the same rows (the template's own forward);
- ``fullrank_fwd_per_s``: today's per-slot path, every member's weights in its slot;
- ``lowrank_fwd_per_s`` (rank 1) and ``lowrank_r4_fwd_per_s`` (rank 4): ES members in
  low-rank slots sharing the centre;
- ``lowrank_ga_fwd_per_s``: GA children (rank 1) of T = 20 parents;

and ``engine_lowrank_fps`` / ``engine_fullrank_fps``: ES generations end to end (env steps
per second; Atari: emulator frames), the same population, at rank 1 and at full rank.

    python scripts/bench_lowrank.py --game breakout --json experiments/bench/cpu-lowrank-large.json

``--set key=value`` items go to every config after the script's own (for example
``env.episode_cap=500``: on breakout a member that never presses FIRE runs to the cap).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.errors import ConfigError
from neuroevo.files import atomic_write
from neuroevo.loop import Totals, one_generation
from neuroevo.noise import NoiseTable
from neuroevo.optim import GA, OpenAIES


def config(task: tuple[str, ...], population: int, rank: int) -> Config:
    """``task``: the env and net keys, then the user's ``--set`` items."""
    cfg = Config()
    apply_sets(cfg, ["algo.name=es", f"algo.population={population}", f"algo.rank={rank}",
                     "engine.device=cpu", "algo.validation_episodes=0", *task])
    return cfg


def forward_paths(task: tuple[str, ...], population: int) -> dict:
    """name -> a zero-argument call of one forward pass over ``population`` rows."""
    full = build(config(task, population, 0))
    policy, spec = full.policy, full.policy.spec
    if full.env.image:  # frames as the emulator gives them
        obs = torch.randint(0, 256, (population, *full.env.obs_shape), dtype=torch.uint8)
    else:
        obs = torch.randn(population, *full.env.obs_shape)
    pop = full.optimizer.ask()
    fullrank = policy.slot_storage(population)
    for i in range(population):
        fullrank.load(i, pop.member_params(i))
    layers = fullrank.prefix(population)
    paths = {"shared_fwd_per_s": lambda: policy.template(obs),
             "fullrank_fwd_per_s": lambda: policy.forward(layers, obs)}
    full.evaluator.close()
    noise = NoiseTable.shared(size=pop.decoder().noise.size)
    shapes = [e.shape for e in spec]
    for key, rank in (("lowrank_fwd_per_s", 1), ("lowrank_r4_fwd_per_s", 4)):
        low = build(config(task, population, rank))
        es = OpenAIES(center=full.optimizer.center, population_size=population, noise=noise,
                      rank=rank, shapes=shapes)
        paths[key] = _slots(low.policy, es.ask(), obs)
        low.evaluator.close()
    low = build(config(task, population, 1))
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=population,
            truncation=20, elite_candidates=0, noise=noise, rank=1, shapes=shapes)
    pop = ga.ask()
    ga.tell(np.random.default_rng(0).standard_normal(population))
    paths["lowrank_ga_fwd_per_s"] = _slots(low.policy, ga.ask(), obs)  # children of 20
    low.evaluator.close()
    return paths


def _slots(policy, pop, obs):
    slots = policy.slot_storage(len(pop))
    for i in range(len(pop)):
        slots.load_lowrank(i, *pop.member_lowrank(i))
    batch = slots.prefix(len(pop))
    return lambda: policy.forward(batch, obs)


def timed(seconds: float, call) -> float:
    """Calls per second of ``call`` over at least ``seconds`` (after one warm-up call)."""
    call()
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        call()
        n += 1
    return n / elapsed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--env", default="HalfCheetah-v5", help="a gymnasium id: the MLP")
    where.add_argument("--game", default="", help="an ALE game: the image net (--net)")
    p.add_argument("--hidden", default="256,256", help="the MLP's hidden sizes")
    p.add_argument("--net", default="large", help="with --game: small or large")
    p.add_argument("--population", type=int, default=256)
    p.add_argument("--seconds", type=float, default=5.0, help="per forward figure and round")
    p.add_argument("--generations", type=int, default=2,
                   help="engine generations per round (0: forward passes only)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default="")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config key for every build (repeatable), e.g. env.episode_cap=500")
    args = p.parse_args(argv)
    torch.set_grad_enabled(False)  # the template's own forward would record autograd
    task = ((f"env.game={args.game}", f"net.name={args.net}") if args.game else
            (f"env.id={args.env}", "net.name=mlp", f"net.hidden={args.hidden}"))
    task = (*task, *args.set)
    try:
        config(task, args.population, 0)
    except ConfigError as e:
        p.error(str(e))
    paths = forward_paths(task, args.population)
    engines = {key: build(config(task, args.population, rank))
               for key, rank in (("engine_fullrank_fps", 0), ("engine_lowrank_fps", 1))
               if args.generations}
    best: dict[str, float] = {}
    try:
        for k in range(args.rounds):
            print(f"round {k + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
            for key, call in paths.items():
                rate = timed(args.seconds, call) * args.population
                best[key] = max(best.get(key, 0.0), rate)
            for key, built in engines.items():
                frames = wall = 0.0
                for _ in range(args.generations):
                    start = time.perf_counter()
                    row, _ = one_generation(built.optimizer, built.evaluator, Totals(),
                                            obs_norm=built.obs_norm)
                    frames += row["generation_frames"]
                    wall += time.perf_counter() - start
                best[key] = max(best.get(key, 0.0), frames / wall)
    finally:
        for built in engines.values():
            built.evaluator.close()
    shared = best["shared_fwd_per_s"]
    ratios = {f"{k[:-len('_per_s')]}_vs_shared": v / shared for k, v in best.items()
              if k.endswith("fwd_per_s") and k != "shared_fwd_per_s"}
    if engines:
        ratios["engine_lowrank_vs_fullrank"] = (best["engine_lowrank_fps"]
                                                / best["engine_fullrank_fps"])
    result = {"task": " ".join(task), "population": args.population,
              "rounds": args.rounds, "cpu_count": os.cpu_count(),
              "torch_threads": torch.get_num_threads(), "machine": platform.processor(),
              **{k: round(v, 1) for k, v in best.items()},
              **{k: round(v, 3) for k, v in ratios.items()}}
    for key, value in result.items():
        print(f"{key:<32}{value:>14,}" if isinstance(value, float) else f"{key:<32}{value!s:>14}")
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
