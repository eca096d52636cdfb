"""MuJoCo Warp physics alone: env steps/s of N worlds on one device, random controls.

Run: python scripts/bench_warp_sim.py [--device cuda:0] [--worlds 1024,4096,16384]
     [--steps 100] [--tasks Humanoid-v5,HalfCheetah-v5] [--json FILE]

Needs mujoco-warp (and warp-lang). It measures the ceiling of a GPU-resident MuJoCo
evaluator (issue 35): gymnasium's own model XML, every world stepped by one captured CUDA
graph of ``mujoco_warp.step`` (no policy, no observation, no reset), timed after the first
step (which compiles the kernels: its seconds are reported as ``first_step_s``). An env step
is ``frame_skip`` physics steps, as in gymnasium. MuJoCo Warp has no PGS solver: a model
that asks for it (Humanoid-v5) is stepped with Newton, MuJoCo's default, and the row says
so (``solver_override``), so its physics is not bit-equal to the CPU env's.
On a CPU device (``--device cpu``) it runs without a graph, for a check, not a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium
import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from neuroevo.envs.locomotion import TASKS
from neuroevo.files import atomic_write

ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def model(task: str) -> tuple[mujoco.MjModel, str | None]:
    """gymnasium's model of ``task``, with PGS replaced by Newton (MuJoCo Warp has no PGS)."""
    mjm = mujoco.MjModel.from_xml_path(os.path.join(ASSETS, TASKS[task].xml))
    if mjm.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        return mjm, "PGS->Newton"
    return mjm, None


def measure(task: str, worlds: int, steps: int) -> dict:
    mjm, override = model(task)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    m = mjw.put_model(mjm)
    start = time.perf_counter()
    d = mjw.put_data(mjm, mjd, nworld=worlds, nconmax=64, njmax=256)
    ctrl = wp.to_torch(d.ctrl)
    lo, hi = (torch.as_tensor(mjm.actuator_ctrlrange[:, i], device=ctrl.device,
                              dtype=ctrl.dtype) for i in (0, 1))
    rng = torch.Generator(device=ctrl.device).manual_seed(0)
    ctrl.copy_(lo + (hi - lo) * torch.rand(ctrl.shape, generator=rng, device=ctrl.device))
    mjw.step(m, d)  # compiles every kernel the model needs
    wp.synchronize()
    first = time.perf_counter() - start
    graph = None
    if wp.get_device().is_cuda:
        with wp.ScopedCapture() as capture:
            mjw.step(m, d)
        graph = capture.graph
    wp.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        if graph is not None:
            wp.capture_launch(graph)
        else:
            mjw.step(m, d)
    wp.synchronize()
    seconds = time.perf_counter() - start
    skip = TASKS[task].frame_skip
    return {"task": task, "device": str(wp.get_device()), "worlds": worlds, "steps": steps,
            "first_step_s": round(first, 1), "graph": graph is not None,
            "solver_override": override,
            "physics_steps_per_s": round(worlds * steps / seconds),
            "env_steps_per_s": round(worlds * steps / seconds / skip),
            "finite": bool(np.isfinite(d.qpos.numpy()).all())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--worlds", default="1024,4096,16384")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--tasks", default="Humanoid-v5,HalfCheetah-v5")
    p.add_argument("--json")
    args = p.parse_args()
    wp.init()
    rows = []
    with wp.ScopedDevice(args.device):
        for task in args.tasks.split(","):
            for worlds in (int(w) for w in args.worlds.split(",")):
                rows.append(measure(task, worlds, args.steps))
                print(json.dumps(rows[-1]), flush=True)
    if args.json:
        atomic_write(args.json, json.dumps({"results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
