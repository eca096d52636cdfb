"""gymnasium's v5 MuJoCo locomotion tasks, rewritten over batches of environments.

Each ``Task`` says which ``MjData`` fields a step reads (``fields``) and computes
observations, rewards and terminations for a whole batch from those fields, as
``[N, ...]`` arrays, the way gymnasium's ``*_v5.py`` computes them for one env (default
keyword arguments). Fields are read after ``mj_step`` + ``mj_rnePostConstraint`` exactly
as gymnasium reads them, so body positions (``xpos``, ``xipos``) are those of the last
sub-step's forward pass, as in gymnasium. The tests compare every task with gymnasium's
own sync vector env.

The same formulas serve MuJoCo Warp (``neuroevo.envs.warp``): given torch tensors, each
function computes with torch on their device (``_xp``), so the two sims share one
definition of every task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

Fields = dict[str, np.ndarray]  # MjData field name -> [N, ...] float64 rows (or tensors)


def _xp(a):
    """numpy for arrays, torch for tensors: the module whose functions compute on ``a``."""
    if isinstance(a, np.ndarray):
        return np
    import torch

    return torch


@dataclass(frozen=True)
class Task:
    xml: str  # gymnasium asset file
    frame_skip: int
    reset_noise: float
    qvel_noise: str  # "uniform" or "normal": how reset_model perturbs qvel
    fields: tuple[str, ...]  # MjData fields a step reads, besides qpos and qvel
    position: Callable[[Fields], np.ndarray]  # [N] x: x speed = its change / dt
    observe: Callable[[Fields], np.ndarray]  # [N, obs_dim]
    # (x speed, action, f, healthy) -> [N]; healthy is the step's ``healthy(f)``, or None
    reward: Callable[[np.ndarray, np.ndarray, Fields, np.ndarray | None], np.ndarray]
    healthy: Callable[[Fields], np.ndarray] | None  # [N] bool; None: never terminates
    walls: tuple = ()  # ((x, y, z), (half x, half y, half z)) boxes added to the world
    base: str | None = None  # the gymnasium task it changes (its time limit); None: itself


def _sq(a: np.ndarray) -> np.ndarray:
    xp = _xp(a)
    return xp.sum(xp.square(a), axis=tuple(range(1, a.ndim)))


def _x(f: Fields) -> np.ndarray:
    return f["qpos"][:, 0]


def _planar_obs(clip_qvel: bool, skip: int):
    def observe(f: Fields) -> np.ndarray:
        xp = _xp(f["qpos"])
        qvel = xp.clip(f["qvel"], -10, 10) if clip_qvel else f["qvel"]
        return xp.concatenate((f["qpos"][:, skip:], qvel), axis=1)
    return observe


def _hopper_healthy(f: Fields) -> np.ndarray:
    xp, z, angle = _xp(f["qpos"]), f["qpos"][:, 1], f["qpos"][:, 2]
    state = xp.concatenate((f["qpos"], f["qvel"]), axis=1)[:, 2:]
    return (xp.all((state > -100.0) & (state < 100.0), axis=1) & (z > 0.7) & (z < np.inf)
            & (angle > -0.2) & (angle < 0.2))


def _walker_healthy(f: Fields) -> np.ndarray:
    z, angle = f["qpos"][:, 1], f["qpos"][:, 2]
    return (z > 0.8) & (z < 2.0) & (angle > -1.0) & (angle < 1.0)


def _ant_obs(f: Fields) -> np.ndarray:
    xp = _xp(f["qpos"])
    contact = xp.clip(f["cfrc_ext"][:, 1:], -1.0, 1.0).reshape(len(f["qpos"]), -1)
    return xp.concatenate((f["qpos"][:, 2:], f["qvel"], contact), axis=1)


def _alive_reward(speed, action, f, healthy):
    return (1.0 * speed + healthy * 1.0) - 1e-3 * _sq(action)


def _ant_reward(speed, action, f, healthy):
    contact = 5e-4 * _sq(_xp(action).clip(f["cfrc_ext"], -1.0, 1.0))
    return speed + healthy * 1.0 - (0.5 * _sq(action) + contact)


def _ant_healthy(f: Fields) -> np.ndarray:
    xp, z = _xp(f["qpos"]), f["qpos"][:, 2]
    finite = xp.all(xp.isfinite(f["qpos"]), axis=1) & xp.all(xp.isfinite(f["qvel"]), axis=1)
    return finite & (z >= 0.2) & (z <= 1.0)


def _mass_center(f: Fields) -> np.ndarray:
    mass = f["body_mass"]  # [bodies], the model's constant
    return (_xp(mass).einsum("b,nbj->nj", mass, f["xipos"]) / mass.sum())[:, 0]


def _humanoid_obs(f: Fields) -> np.ndarray:
    n = len(f["qpos"])
    return _xp(f["qpos"]).concatenate(
        (f["qpos"][:, 2:], f["qvel"], f["cinert"][:, 1:].reshape(n, -1),
         f["cvel"][:, 1:].reshape(n, -1), f["qfrc_actuator"][:, 6:],
         f["cfrc_ext"][:, 1:].reshape(n, -1)), axis=1)


def _humanoid_healthy(f: Fields) -> np.ndarray:
    z = f["qpos"][:, 2]
    return (z > 1.0) & (z < 2.0)


def _humanoid_reward(speed, action, f, healthy):
    contact = _xp(action).clip(5e-7 * _sq(f["cfrc_ext"]), -np.inf, 10.0)
    # gymnasium's Humanoid charges the control actually applied (data.ctrl, float64).
    return 1.25 * speed + healthy * 5.0 - (0.1 * _sq(f["ctrl"]) + contact)


TASKS: dict[str, Task] = {
    "HalfCheetah-v5": Task(
        "half_cheetah.xml", 5, 0.1, "normal", (), _x, _planar_obs(False, 1),
        lambda speed, a, f, healthy: 1.0 * speed - 0.1 * _sq(a), None),
    "Hopper-v5": Task(
        "hopper.xml", 4, 5e-3, "uniform", (), _x, _planar_obs(True, 1), _alive_reward,
        _hopper_healthy),
    "Walker2d-v5": Task(
        "walker2d_v5.xml", 4, 5e-3, "uniform", (), _x, _planar_obs(True, 1), _alive_reward,
        _walker_healthy),
    "Ant-v5": Task(
        "ant.xml", 5, 0.1, "normal", ("xpos", "cfrc_ext"), lambda f: f["xpos"][:, 1, 0],
        _ant_obs, _ant_reward, _ant_healthy),
    "Humanoid-v5": Task(
        "humanoid.xml", 5, 1e-2, "uniform",
        ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext", "ctrl"), _mass_center,
        _humanoid_obs, _humanoid_reward, _humanoid_healthy),
    "Swimmer-v5": Task(
        "swimmer.xml", 4, 0.1, "uniform", (), _x, _planar_obs(False, 2),
        lambda speed, a, f, healthy: 1.0 * speed - 1e-4 * _sq(a), None),
}
# The deceptive trap of Conti et al. 2018 (uber-research/deep-neuroevolution,
# extra/humanoid_maze.xml): a U of three walls 2 high, open towards the start, 2.5 to 5.5
# ahead and 3 wide, around the path that the forward-speed reward pulls the walker along.
# Theirs is Humanoid-v1's model; this is Humanoid-v5's (its reward, observations and
# 1,000-step limit) with their three walls.
TRAP_WALLS = (((5.5, 0.0, 0.0), (0.1, 1.5, 2.0)), ((4.0, 1.5, 0.0), (1.5, 0.1, 2.0)),
              ((4.0, -1.5, 0.0), (1.5, 0.1, 2.0)))
TASKS["HumanoidTrap-v0"] = replace(TASKS["Humanoid-v5"], walls=TRAP_WALLS, base="Humanoid-v5")
# gymnasium's own six tasks (what env.sim=warp runs: the trap's walls are not ported there)
V5_TASKS = tuple(name for name, task in TASKS.items() if task.base is None)
# The feet of env.behaviour=feet_contact (QDax's FEET_NAMES, in its order, by gymnasium's
# body names; Ant's feet are its unnamed last bodies of the four legs, QDax's "$ Body 4" ...
# "$ Body 13"). Where we differ: Humanoid's are its feet, where QDax takes Brax's shins,
# whose capsules end at the sole: gymnasium's humanoid has separate foot bodies.
FEET: dict[str, tuple[str | int, ...]] = {
    "HalfCheetah-v5": ("bfoot", "ffoot"), "Hopper-v5": ("foot",),
    "Walker2d-v5": ("foot", "foot_left"), "Ant-v5": (4, 7, 10, 13),
    "Humanoid-v5": ("left_foot", "right_foot"), "HumanoidTrap-v0": ("left_foot", "right_foot")}
