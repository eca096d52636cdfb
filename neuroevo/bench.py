"""``neuroevo bench``: the engine against its bounds and a naive loop, side by side in one run.

- ``sim_only_fps``: the env pools stepping random actions (emulator frames/s), same layout
  and threads as the engine;
- ``inference_only_fps``: the batched forward pass alone, as frames/s (x frameskip);
- ``naive_fps``: one network at a time, batch of 1, one env, a plain sequential loop;
- ``engine_fps``: the pipelined evaluator end to end: whole generations of the run that
  ``neuroevo run`` builds from the same flags (``run_config``; ``--set`` changes any key of
  it): Deep GA on an Atari game (training and elite-validation phases), OpenAI-ES on a
  gymnasium id (``--env``: training and centre phases; frames are env steps);
- ``bound_fps``: min(sim, inference) when inference runs on a GPU, and
  1 / (1/sim + 1/inference) when both share the CPU cores;
- ``efficiency = engine / bound`` and ``speedup_vs_naive = engine / naive``.

``--sim warp`` (a MuJoCo task) measures MuJoCo Warp in the same rounds, beside all of the
above for ``--sim native``: ``warp.sim_only_fps`` (the worlds stepping random actions and
computing observations, no network), ``warp.engine_fps`` (``WarpEvaluator``'s whole
generations of the same run), ``warp.efficiency = engine / sim_only`` and
``warp.vs_native = warp engine / native engine``.
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

from neuroevo.build import Built, build
from neuroevo.config import Config, apply_sets, override, to_dict
from neuroevo.engine.pipeline import default_layout
from neuroevo.envs.warp import memory_need
from neuroevo.errors import ConfigError, UnknownName, check_range
from neuroevo.evaluation import EpisodeBatch, Job
from neuroevo.files import atomic_write
from neuroevo.loop import Tests, logging_jobs, merge_observations
from neuroevo.policy.batched import SlotParams
from neuroevo.policy.heads import to_actions


@dataclass
class BenchConfig:
    game: str = "breakout"
    env: str = ""  # a gymnasium id (MuJoCo tasks included): ES on it instead of GA on ``game``
    algo: str = ""  # the algorithm whose generations the engine runs ("": ga on a game, es
    # on an env id, the papers' pairings; any name in neuroevo.optim.ALGORITHMS)
    net: str = ""  # "": large for a game, mlp (256-256, the paper's) for an id
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
    sets: tuple[str, ...] = ()  # further run-config keys, KEY=VALUE (``--set``)
    sim: str = "native"  # warp: MuJoCo Warp measured too, beside native (module docstring)


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
            ("--seed", cfg.seed, cfg.seed >= 0, ">= 0"),
            ("--sim", cfg.sim, cfg.sim in ("native", "warp"), "native or warp")):
        check_range(name, value, ok, allowed)
    nets = ("large", "small", "mlp") if cfg.env else ("large", "small")
    if cfg.net and cfg.net not in nets:
        raise UnknownName("network for a gymnasium bench" if cfg.env else
                          "network for an Atari bench", cfg.net, nets)


def run_config(b: BenchConfig) -> Config:
    """The run the bench measures: ``neuroevo run ALGO`` on ``game`` or ``env`` (default: ga
    on a game, es on an env), with the bench's flags, so the engine figure is that of a run
    with every default (elite validation, centre episodes, observation normalisation) of
    ``run``."""
    cfg = Config(seed=b.seed)
    net = b.net or ("mlp" if b.env else "large")
    algo = b.algo or ("es" if b.env else "ga")
    where = (("env.id", b.env),) if b.env else (("env.game", b.game),)
    for key, value in (*where, ("algo.name", algo), ("env.episode_cap", b.episode_cap),
                       ("net.name", net), ("algo.population", b.population),
                       ("engine.device", b.device), ("engine.subsets", b.subsets or 0),
                       ("engine.slots", b.slots or 0), ("engine.env_threads", b.env_threads),
                       ("engine.workers", b.workers)):
        override(cfg, key, value)
    apply_sets(cfg, b.sets)
    if cfg.env.id != b.env or cfg.algo.name != algo or cfg.engine.backend != "local":
        raise ConfigError("neuroevo bench measures --algo on --game or --env in this process; "
                          "leave env.id, algo.name and engine.backend to those flags")
    return cfg


def _sim(built: Built, subsets: int, slots: int, threads: int, rng):
    """The env pools alone, stepping random actions: ``(step, pools)``."""
    env = built.env
    pools = [env.make_pool(slots, threads) for _ in range(subsets)]
    for p in pools:
        p.reset(np.ones(slots, dtype=bool), rng.integers(0, 2**31, slots))

    def step() -> int:
        for p in pools:  # all pools step at once, as in the engine
            p.send(env.action.sample(rng, slots))
        for p in pools:
            _, _, done = p.recv()
            # stepped again only after a reset (ale-py resets on its own, without the
            # seeded ROM reload)
            if not env.traits.resets_itself and done.any():
                p.reset(done, rng.integers(0, 2**31, int(done.sum())))
        return subsets * slots * env.frameskip

    return step, pools


def _inference(built: Built, slots: int, probe):
    """The batched forward pass alone over ``slots`` networks of the first population."""
    store = SlotParams(built.policy.spec, slots, built.device, built.policy.kernels)
    pop = built.optimizer.ask()
    for row in range(slots):
        store.load(row, pop.member_params(row % len(pop), built.device))
        built.policy.prepare(store.layers, row)
    obs = torch.from_numpy(np.stack([probe.reset(np.ones(1, bool), [s])[0]
                                     for s in range(slots)])).to(built.device)

    def step() -> int:
        out = built.policy.forward(store.prefix(slots), obs)
        out.argmax(1).cpu()  # sync: as the engine does every step
        return slots * built.env.frameskip

    return step


def _naive(built: Built, probe, episode_cap: int):
    """One network, batch of one, one env: a plain sequential loop."""
    device = built.device
    net = built.policy.template
    weights = built.policy.spec.unflatten(built.optimizer.ask().member_params(0, device))
    state = {"obs": probe.reset(np.ones(1, bool), [0]), "steps": 0}
    normalize = built.obs_norm.frozen(device) if built.obs_norm is not None else None

    def step() -> int:
        x = torch.from_numpy(state["obs"]).to(device)
        with torch.no_grad():
            out = functional_call(net, weights, (x if normalize is None else normalize(x),))
        probe.send(to_actions(out, built.env.action))
        state["obs"], _, done = probe.recv()
        state["steps"] += 1
        if done[0] or state["steps"] >= episode_cap:
            state["obs"], state["steps"] = probe.reset(np.ones(1, bool), [state["steps"]]), 0
        return built.env.frameskip

    return step


def engine_rate(built: Built, seconds: float, warmup: bool = False
                ) -> tuple[float, dict, float, float]:
    """Whole generations (every phase, as ``neuroevo run``: ES's centre episodes in the next
    generation's first pass) for at least ``seconds``, ending where a generation ends:
    ``(frames/s, stage seconds, occupancy, seconds in passes)``. ``warmup`` first runs one
    whole generation off the clock, for the steady state of a long run without its one-time
    start (the NS family's first behaviour pass of every centre, the first allocations)."""
    parts: list = []
    carried: list[Job] = []
    warming, done = warmup, True
    while warming or not done or sum(r.wall_time for _, r in parts) < seconds:
        pop = built.optimizer.ask()
        results = built.evaluator.evaluate([Job(pop), *carried])
        merge_observations(built.obs_norm, results[0])
        told = built.optimizer.tell(results[0].fitness, results[0].extras.get("bc"))
        done = told["generation_done"]
        carried = ([job for _, job in logging_jobs(built.optimizer, Tests(), 0, False)]
                   if done else [])
        if not warming:
            parts += [(None, r) for r in results]
        warming = warming and not done
    total = EpisodeBatch.combine(parts)  # passes one after another
    return total.frames / total.wall_time, total.timings, total.occupancy, total.wall_time


def _warp_sim(warp: Built, rng: torch.Generator):
    """MuJoCo Warp's worlds alone: random actions, physics and observations on the device,
    ended worlds restarted at the checks the engine makes (``engine.warp.CHUNK``)."""
    from neuroevo.engine.warp import CHUNK

    sims, dev = warp.evaluator.sims, warp.device
    low, high = (torch.from_numpy(b).to(dev) for b in warp.env.action.bounds())
    qpos0 = torch.from_numpy(sims.init_qpos).to(dev).expand(sims.nworld, -1)
    qvel0 = torch.from_numpy(sims.init_qvel).to(dev).expand(sims.nworld, -1)
    elapsed = torch.zeros(sims.nworld, dtype=torch.int64, device=dev)
    everyone = torch.ones(sims.nworld, dtype=torch.bool, device=dev)
    sims.reset(everyone, qpos0, qvel0)

    def step() -> int:
        nonlocal elapsed
        ended = torch.zeros_like(everyone)
        for _ in range(CHUNK):
            u = torch.rand(sims.nworld, len(low), generator=rng, device=dev)
            _, terminated = sims.step(low + (high - low) * u)
            sims.observe()
            elapsed += 1
            ended |= terminated | (elapsed >= warp.env.max_steps)
        if bool(ended.any()):  # sync: the check
            sims.reset(ended, qpos0, qvel0)
            elapsed = torch.where(ended, 0, elapsed)
        return CHUNK * sims.nworld

    return step


def _round(steps: dict, built: Built, seconds: float, warp: Built | None = None) -> dict:
    out = {}
    for name, step in steps.items():
        frames, elapsed = _timed(seconds, step)
        out[name] = frames / elapsed
    engine, timings, occupancy, wall = engine_rate(built, seconds)
    # the stages' seconds are summed over the driver threads; engine_seconds is their wall
    out.update(engine_fps=engine, occupancy=occupancy, stage_seconds=timings,
               engine_seconds=wall)
    if warp is not None:
        engine, timings, occupancy, wall = engine_rate(warp, seconds)
        out.update(warp_engine_fps=engine, warp_occupancy=occupancy,
                   warp_stage_seconds=timings, warp_engine_seconds=wall)
    return out


def run_bench(cfg: BenchConfig, log=print) -> dict:
    check_bench(cfg)
    built = build(run_config(cfg))  # the engine, policy and optimizer as `neuroevo run` has them
    warp = None
    if cfg.sim == "warp":
        warp_cfg = run_config(cfg)
        # one driver over a world per episode of a pass (the native layout flags are not its)
        for key, value in (("env.sim", "warp"), ("engine.subsets", 0), ("engine.slots", 0),
                           ("engine.env_threads", 0), ("engine.workers", 0)):
            override(warp_cfg, key, value)
        warp = build(warp_cfg)
    device, spec = built.device, built.policy.spec
    subsets, slots = default_layout(cfg.population, device, built.env.traits)
    subsets, slots = cfg.subsets or subsets, cfg.slots or slots
    engine = built.evaluator.layout()
    result = {"config": asdict(cfg), "run_config": to_dict(built.config), "device": str(device),
              "net": built.config.net.name if built.config.net.name != "mlp" else
              f"mlp {built.config.net.hidden}",
              "kernels": f"{built.policy.kernels.backend}+{built.policy.kernels.conv}",
              "subsets": subsets, "slots": slots, "num_params": spec.num_params,
              "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
              "machine": platform.processor(),
              "engine_workers": engine["workers"], "engine_layout": engine}
    pools = [built.env.make_pool(1, threads=1)]  # the naive loop's env, the inference's input
    rounds = []
    try:
        sim_step, sim_pools = _sim(built, subsets, slots, cfg.env_threads,
                                   np.random.default_rng(cfg.seed))
        pools += sim_pools
        steps = {"sim_only_fps": sim_step, "inference_only_fps": _inference(built, slots, pools[0]),
                 "naive_fps": _naive(built, pools[0], cfg.episode_cap)}
        if warp is not None:
            generator = torch.Generator(warp.device).manual_seed(cfg.seed)
            steps["warp_sim_only_fps"] = _warp_sim(warp, generator)
        # Rounds interleave the four measurements so that a noisy neighbour on a shared
        # machine hits all of them alike; each figure is its best round.
        for k in range(cfg.rounds):
            log(f"round {k + 1}/{cfg.rounds}: sim only ({subsets} pools x {slots} envs), "
                f"inference only ({slots} nets per pass), naive, engine ...")
            rounds.append(_round(steps, built, cfg.seconds, warp))
    finally:
        for p in pools:
            p.close()
        built.evaluator.close()
        if warp is not None:
            warp.evaluator.close()
    result.update(figures(rounds, device.type == "cuda"))
    if warp is not None:
        result["warp"] = warp_figures(rounds, warp, result["engine_fps"])
    return result


def warp_figures(rounds: list[dict], warp: Built, native_engine: float) -> dict:
    """The Warp figures of interleaved rounds (each rate its best round)."""
    best = max(rounds, key=lambda r: r["warp_engine_fps"])
    sim = max(r["warp_sim_only_fps"] for r in rounds)
    engine = best["warp_engine_fps"]
    return {"sim_only_fps": sim, "engine_fps": engine, "efficiency": engine / sim,
            "vs_native": engine / native_engine, "occupancy": best["warp_occupancy"],
            "stage_seconds": best["warp_stage_seconds"], "worlds": warp.evaluator.worlds,
            "device": str(warp.device),
            # torch's peak on a GPU (parameter rows, episode tensors; native's too), None on
            # the CPU; Warp's own Data is data_bytes (envs.warp.memory_need)
            "peak_memory_bytes": (torch.cuda.max_memory_allocated(warp.device)
                                  if warp.device.type == "cuda" else None),
            "data_bytes": memory_need(warp.env.name, warp.evaluator.worlds)}


def figures(rounds: list[dict], on_gpu: bool) -> dict:
    """The reported figures of interleaved rounds: each rate its best round; the stages and
    occupancy of the best engine round; the bound, efficiency and speedup from those."""
    out = {key: max(r[key] for r in rounds)
           for key in ("sim_only_fps", "inference_only_fps", "naive_fps", "engine_fps")}
    best = max(rounds, key=lambda r: r["engine_fps"])
    sim, inf = out["sim_only_fps"], out["inference_only_fps"]
    # On a GPU the two stages overlap, so the slower one bounds; on a CPU they share the
    # cores, so their times per frame add.
    out["bound_fps"] = min(sim, inf) if on_gpu else 1 / (1 / sim + 1 / inf)
    out.update(efficiency=out["engine_fps"] / out["bound_fps"],
               speedup_vs_naive=out["engine_fps"] / out["naive_fps"],
               occupancy=best["occupancy"], stage_seconds=best["stage_seconds"], rounds=rounds)
    return out


def format_table(r: dict) -> str:
    rows = [("sim_only_fps", r["sim_only_fps"]), ("inference_only_fps", r["inference_only_fps"]),
            ("naive_fps", r["naive_fps"]), ("engine_fps", r["engine_fps"]),
            ("bound_fps", r["bound_fps"])]
    c, e = r["config"], r["engine_layout"]
    unit = "steps/s" if c["env"] else "frames/s"
    lines = [f"{c['env'] or c['game']} / {r['net']} net ({r['num_params']:,} params), "
             f"population {r['config']['population']}, {r['subsets']} x {r['slots']} slots, "
             f"device {r['device']} ({r['kernels']}), {r['cpu_count']} cores, engine: "
             f"{e['workers']} driver thread(s) of {e['subsets']} x {e['slots']} slots"]
    lines += [f"  {name:<20}{value:>12,.0f} {unit}" for name, value in rows]
    lines += [f"  {'efficiency':<20}{r['efficiency']:>12.2f}   (engine / bound)",
              f"  {'speedup_vs_naive':<20}{r['speedup_vs_naive']:>12.2f}",
              f"  {'slot occupancy':<20}{r['occupancy']:>12.2f}",
              "  per round (engine / naive): " + ", ".join(
                  f"{x['engine_fps'] / x['naive_fps']:.2f}" for x in r["rounds"]),
              "  engine stages (s): " + ", ".join(f"{k} {v:.1f}"
                                                  for k, v in r["stage_seconds"].items())]
    w = r.get("warp")
    if w is not None:
        lines += [f"  MuJoCo Warp, {w['worlds']:,} worlds on {w['device']}:",
                  f"  {'warp sim_only_fps':<20}{w['sim_only_fps']:>12,.0f} {unit}",
                  f"  {'warp engine_fps':<20}{w['engine_fps']:>12,.0f} {unit}",
                  f"  {'warp efficiency':<20}{w['efficiency']:>12.2f}   (warp engine / sim_only)",
                  f"  {'warp vs native':<20}{w['vs_native']:>12.2f}   (engine_fps ratio)",
                  f"  {'warp occupancy':<20}{w['occupancy']:>12.2f}",
                  "  warp stages (s): " + ", ".join(f"{k} {v:.1f}"
                                                    for k, v in w["stage_seconds"].items())]
    return "\n".join(lines)


def write_json(r: dict, path: str) -> None:
    atomic_write(path, json.dumps(r, indent=2))
