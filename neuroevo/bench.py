"""``neuroevo bench``: the engine against its bounds and a naive loop, side by side in one run.

- ``sim_only_fps``: the env pools stepping random actions (emulator frames/s), same layout
  and threads as the engine;
- ``inference_only_fps``: the batched forward pass alone, as frames/s (x frameskip);
- ``naive_fps``: one network at a time, batch of 1, one env, a plain sequential loop;
- ``engine_fps``: the pipelined evaluator end to end, GA generations on a population;
- ``bound_fps``: min(sim, inference) when inference runs on a GPU, and
  1 / (1/sim + 1/inference) when both share the CPU cores;
- ``efficiency = engine / bound`` and ``speedup_vs_naive = engine / naive``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch.func import functional_call

from neuroevo.config import EnvConfig
from neuroevo.engine.parallel import make_evaluator
from neuroevo.engine.pipeline import EvalResult, default_layout, resolve_device
from neuroevo.envs.spec import env_spec
from neuroevo.errors import UnknownName, check_range
from neuroevo.files import atomic_write
from neuroevo.kernels import from_environment
from neuroevo.optim import GA
from neuroevo.policy.batched import BatchedPolicy, SlotParams
from neuroevo.policy.nets import build_template


@dataclass
class BenchConfig:
    game: str = "breakout"
    net: str = "large"
    population: int = 64
    seconds: float = 20.0  # per measurement and round
    rounds: int = 2  # interleaved repetitions; each figure is its best round
    device: str = "auto"
    subsets: int | None = None  # None: default_layout
    slots: int | None = None
    env_threads: int = 0  # per pool; 0: ale-py's choice (1 with several workers)
    workers: int = 0  # driver threads of the engine; 0: as `neuroevo run` (default_workers)
    episode_cap: int = 5000
    seed: int = 0


def _timed(seconds: float, step) -> tuple[int, float]:
    """Call ``step() -> frames`` until ``seconds`` have passed; ``(frames, elapsed)``."""
    frames, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        frames += step()
    return frames, elapsed


def check_bench(cfg: BenchConfig) -> None:
    """Every option in its range, before any env or network is made."""
    for name, value, ok, allowed in (
            ("--seconds", cfg.seconds, math.isfinite(cfg.seconds) and cfg.seconds > 0, "> 0"),
            ("--rounds", cfg.rounds, cfg.rounds >= 1, ">= 1"),
            ("--population", cfg.population, cfg.population >= 1, ">= 1"),
            ("--workers", cfg.workers, cfg.workers >= 0, ">= 0 (0: automatic)"),
            ("--env-threads", cfg.env_threads, cfg.env_threads >= 0, ">= 0 (0: ale-py's)"),
            ("--subsets", cfg.subsets, cfg.subsets is None or cfg.subsets >= 1, ">= 1"),
            ("--slots", cfg.slots, cfg.slots is None or cfg.slots >= 1, ">= 1"),
            ("--episode-cap", cfg.episode_cap, cfg.episode_cap >= 1, ">= 1"),
            ("--seed", cfg.seed, cfg.seed >= 0, ">= 0")):
        check_range(name, value, ok, allowed)
    if cfg.net not in ("large", "small"):
        raise UnknownName("network for an Atari bench", cfg.net, ("large", "small"))


def run_bench(cfg: BenchConfig, log=print) -> dict:
    check_bench(cfg)
    device = resolve_device(cfg.device)
    kernels = from_environment(device)  # checks NEUROEVO_* before any work
    env = env_spec(EnvConfig(game=cfg.game, episode_cap=cfg.episode_cap))
    atari = env.atari
    subsets, slots = default_layout(cfg.population, device)
    subsets, slots = cfg.subsets or subsets, cfg.slots or slots
    probe = env.make_pool(1, threads=1)  # the naive loop's one env
    template, spec = build_template(cfg.net, env.obs_shape, env.action.outputs)
    policy = BatchedPolicy(template, spec, kernels)
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=cfg.population,
            truncation=max(1, min(20, cfg.population // 2)), elite_candidates=0, seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    result = {"config": asdict(cfg), "device": str(device),
              "kernels": f"{kernels.backend}+{kernels.conv}", "subsets": subsets, "slots": slots,
              "num_params": spec.num_params, "cpu_count": os.cpu_count(),
              "torch_threads": torch.get_num_threads(), "machine": platform.processor()}

    pools = [env.make_pool(slots, cfg.env_threads) for _ in range(subsets)]
    for p in pools:
        p.reset(np.ones(slots, dtype=bool), rng.integers(0, 2**31, slots))

    def sim_step():
        for p in pools:  # all pools step at once, as in the engine
            p.send(rng.integers(0, env.action.n, slots).astype(np.int32))
        for p in pools:
            p.recv()
        return subsets * slots * atari.frameskip

    store = SlotParams(spec, slots, device, kernels)
    pop = ga.ask()
    for row in range(slots):
        store.load(row, pop.member_params(row % len(pop), device))
    obs = torch.from_numpy(np.stack([probe.reset(np.ones(1, bool), [s])[0]
                                     for s in range(slots)])).to(device)

    def infer_step():
        out = policy.forward(store.prefix(slots), obs)
        out.argmax(1).cpu()  # sync: as the engine does every step
        return slots * atari.frameskip

    net = template.to(device)
    weights = spec.unflatten(pop.member_params(0, device))
    state = {"obs": probe.reset(np.ones(1, bool), [0]), "steps": 0}

    def naive_step():
        x = torch.from_numpy(state["obs"]).to(device)
        with torch.no_grad():
            action = functional_call(net, weights, (x,)).argmax(1).cpu().numpy()
        probe.send(action.astype(np.int32))
        state["obs"], _, done = probe.recv()
        state["steps"] += 1
        if done[0] or state["steps"] >= cfg.episode_cap:
            state["obs"], state["steps"] = probe.reset(np.ones(1, bool), [state["steps"]]), 0
        return atari.frameskip

    # the engine as `neuroevo run` builds it: several driver threads on a CPU
    evaluator = make_evaluator(
        policy, env, cfg.population, device, workers=cfg.workers, subsets=cfg.subsets or 0,
        slots=cfg.slots or 0, env_threads=cfg.env_threads, seed=cfg.seed)
    result["engine_workers"] = len(getattr(evaluator, "parts", [evaluator]))

    def engine_run():
        parts: list = []
        while sum(r.wall_time for _, r in parts) < cfg.seconds:
            pop = ga.ask()
            r = evaluator.evaluate(pop)
            ga.tell(r.fitness)
            parts.append((None, r))
        total = EvalResult.combine(parts)  # generations one after another
        return total.frames / total.wall_time, total.timings, total.occupancy

    # Rounds interleave the four measurements so that a noisy neighbour on a shared
    # machine hits all of them alike; each figure is its best round.
    rounds = []
    for k in range(cfg.rounds):
        log(f"round {k + 1}/{cfg.rounds}: sim only ({subsets} pools x {slots} envs), "
            f"inference only ({slots} nets per pass), naive, engine ...")
        frames, elapsed = _timed(cfg.seconds, sim_step)
        sim = frames / elapsed
        frames, elapsed = _timed(cfg.seconds, infer_step)
        inference = frames / elapsed
        frames, elapsed = _timed(cfg.seconds, naive_step)
        naive = frames / elapsed
        engine, timings, occupancy = engine_run()
        rounds.append({"sim_only_fps": sim, "inference_only_fps": inference,
                       "naive_fps": naive, "engine_fps": engine, "occupancy": occupancy,
                       "stage_seconds": timings})
    for p in pools:
        p.close()
    probe.close()
    evaluator.close()
    for key in ("sim_only_fps", "inference_only_fps", "naive_fps", "engine_fps"):
        result[key] = max(r[key] for r in rounds)
    best = max(rounds, key=lambda r: r["engine_fps"])
    result.update(occupancy=best["occupancy"], stage_seconds=best["stage_seconds"],
                  rounds=rounds)

    sim, inf = result["sim_only_fps"], result["inference_only_fps"]
    result["bound_fps"] = min(sim, inf) if device.type == "cuda" else 1 / (1 / sim + 1 / inf)
    result["efficiency"] = result["engine_fps"] / result["bound_fps"]
    result["speedup_vs_naive"] = result["engine_fps"] / result["naive_fps"]
    return result


def format_table(r: dict) -> str:
    rows = [("sim_only_fps", r["sim_only_fps"]), ("inference_only_fps", r["inference_only_fps"]),
            ("naive_fps", r["naive_fps"]), ("engine_fps", r["engine_fps"]),
            ("bound_fps", r["bound_fps"])]
    lines = [f"{r['config']['game']} / {r['config']['net']} net ({r['num_params']:,} params), "
             f"population {r['config']['population']}, {r['subsets']} x {r['slots']} slots, "
             f"device {r['device']} ({r['kernels']}), {r['cpu_count']} cores, engine: "
             f"{r['engine_workers']} driver thread(s)"]
    lines += [f"  {name:<20}{value:>12,.0f} frames/s" for name, value in rows]
    lines += [f"  {'efficiency':<20}{r['efficiency']:>12.2f}   (engine / bound)",
              f"  {'speedup_vs_naive':<20}{r['speedup_vs_naive']:>12.2f}",
              f"  {'slot occupancy':<20}{r['occupancy']:>12.2f}",
              "  per round (engine / naive): " + ", ".join(
                  f"{x['engine_fps'] / x['naive_fps']:.2f}" for x in r["rounds"]),
              "  engine stages (s): " + ", ".join(f"{k} {v:.1f}"
                                                  for k, v in r["stage_seconds"].items())]
    return "\n".join(lines)


def write_json(r: dict, path: str) -> None:
    atomic_write(path, json.dumps(r, indent=2))
