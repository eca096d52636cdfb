"""Batched MuJoCo env steps/s vs gymnasium's sync vector env vs physics alone, side by side.

Run: python scripts/bench_mujoco.py [--tasks HalfCheetah-v5,Ant-v5] [--envs 32]
     [--seconds 3] [--rounds 3] [--threads 0] [--json FILE]

For each task, in interleaved rounds (each figure is its best round):
- ``batched``: ``neuroevo.envs.make_vec`` stepped with random actions (autoreset included);
- ``python_loop``: the same env stepping its envs through the Python loop instead of
  ``mjnative``'s C loop (``native=False``), for the ratio of the two;
- ``gym_sync``: ``gymnasium.make_vec(id, n, vectorization_mode="sync")``, the same actions;
- ``physics``: the batched env's own ``MjData`` stepped with ``mj_step(nstep=frame_skip)``
  alone, in the same worker threads, restarting episodes where the env would (time limit,
  termination from qpos/qvel): the bound on what the Python loop can reach (a Python loop
  itself, so the C loop may pass it).
Env steps/s count agent steps (one per env per ``step`` call).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import gymnasium
import mujoco
import numpy as np

from neuroevo.envs import make_vec
from neuroevo.envs.locomotion import TASKS
from neuroevo.envs.mujoco_vec import MujocoVectorEnv
from neuroevo.files import atomic_write


def _rate(seconds: float, step, n: int) -> float:
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step()
        steps += n
    return steps / elapsed


def bench_task(env_id: str, n: int, seconds: float, rounds: int, threads: int) -> dict:
    ours = make_vec(env_id, n, threads)
    python = MujocoVectorEnv(env_id, n, threads, native=False)
    ref = gymnasium.make_vec(env_id, n, vectorization_mode="sync")
    for env in (ours, python, ref):
        env.reset(seed=0)
    sims = ours.sims
    actions = np.random.default_rng(0).uniform(
        sims.action_bounds[0], sims.action_bounds[1], size=(64, n, sims.num_actions),
    ).astype(np.float32)
    counter = iter(range(1 << 62))

    # physics: ctrl, mj_step and the qpos/qvel reads that tell when an episode ends (so that
    # episodes restart where the env would restart them: a fallen Humanoid steps slower)
    qpos, qvel = np.zeros((n, sims.model.nq)), np.zeros((n, sims.model.nv))
    elapsed = np.zeros(n, dtype=np.int64)

    def physics_chunk(chunk, act):
        for i in chunk:
            d = sims.datas[i]
            np.copyto(d.ctrl, act[i])
            mujoco.mj_step(sims.model, d, nstep=sims.task.frame_skip)
            np.copyto(qpos[i], d.qpos)
            np.copyto(qvel[i], d.qvel)

    chunks = [c for c in np.array_split(np.arange(n), sims.threads) if len(c)]

    def physics():  # as the batched env does: the caller steps the last chunk itself
        act = actions[next(counter) % 64]
        futures = [sims._workers.submit(physics_chunk, c, act) for c in chunks[:-1]]
        physics_chunk(chunks[-1], act)
        for f in futures:
            f.result()
        elapsed[:] += 1
        ended = elapsed >= ours.max_episode_steps
        if sims.task.healthy is not None:
            ended |= ~sims.task.healthy({"qpos": qpos, "qvel": qvel})
        restart = np.flatnonzero(ended)
        sims.reset(restart, [None] * len(restart))
        elapsed[restart] = 0

    fns = {"batched": lambda: ours.step(actions[next(counter) % 64]),
           "python_loop": lambda: python.step(actions[next(counter) % 64]),
           "gym_sync": lambda: ref.step(actions[next(counter) % 64]),
           "physics": physics}
    best = dict.fromkeys(fns, 0.0)
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = max(best[name], _rate(seconds, fn, n))
    for env in (ours, python, ref):
        env.close()
    return {"task": env_id, "envs": n, "threads": sims.threads,
            **{f"{k}_steps_per_s": round(v) for k, v in best.items()},
            "speedup_vs_gym_sync": round(best["batched"] / best["gym_sync"], 3),
            "native_vs_python_loop": round(best["batched"] / best["python_loop"], 3),
            "fraction_of_physics": round(best["batched"] / best["physics"], 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--envs", type=int, default=32)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="worker threads; 0: one per core")
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args()
    rows = []
    print(f"{'task':16} {'batched':>9} {'py loop':>9} {'gym_sync':>9} {'physics':>9} "
          f"{'vs sync':>8} {'vs py':>6} {'of phys':>8}")
    for env_id in args.tasks.split(","):
        r = bench_task(env_id, args.envs, args.seconds, args.rounds, args.threads)
        rows.append(r)
        print(f"{env_id:16} {r['batched_steps_per_s']:9} {r['python_loop_steps_per_s']:9} "
              f"{r['gym_sync_steps_per_s']:9} {r['physics_steps_per_s']:9} "
              f"{r['speedup_vs_gym_sync']:8.2f} {r['native_vs_python_loop']:6.2f} "
              f"{r['fraction_of_physics']:8.2f}", flush=True)
    if args.json:
        meta = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                "mujoco": mujoco.__version__, "gymnasium": gymnasium.__version__}
        atomic_write(args.json, json.dumps({"machine": meta, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
