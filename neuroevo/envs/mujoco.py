"""Batched MuJoCo locomotion: many ``MjData`` of one task, stepped in worker threads.

``MujocoSims`` owns the simulations. A step hands each worker thread a chunk of envs; for
each it sets ``ctrl``, calls ``mj_step(nstep=frame_skip)`` and ``mj_rnePostConstraint``
(both release the GIL, so the chunks run in parallel) and copies the fields the task reads
into ``[N, ...]`` buffers. Observations, rewards and terminations are then computed for the
whole batch at once by ``locomotion.TASKS``; there is no per-env Python in that part.

Two front ends share it: ``make_vec`` returns a ``gymnasium.vector.VectorEnv`` equal to
``gymnasium.make_vec(id, n, vectorization_mode="sync")`` (same seeds, next-step autoreset),
and ``MujocoPool`` speaks the engine's ``reset(mask, seeds) / send / recv`` protocol, with
``send`` returning at once so the driver computes another subset's forward pass meanwhile.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np

from neuroevo.envs.base import PoolBase
from neuroevo.envs.locomotion import FEET, TASKS
from neuroevo.envs.mjnative import Stepper
from neuroevo.errors import (
    ConfigError,
    DependencyNotInstalled,
    StateError,
    UnknownName,
    WorkerError,
    check_range,
)


def _mujoco():
    try:
        import gymnasium.envs.mujoco  # noqa: F401 - the task assets live there
        import mujoco
    except ImportError as e:  # pragma: no cover - declared dependencies
        raise DependencyNotInstalled("MuJoCo tasks need mujoco and gymnasium[mujoco]: "
                                     "pip install 'gymnasium[mujoco]'") from e
    return mujoco


def _model(task):
    """The task's ``MjModel``, compiled from gymnasium's own asset file.

    HalfCheetah's file sets ``<compiler settotalmass="14">``, which MuJoCo (3.3 and later)
    compiles with a deprecation warning printed at each compile. The model is compiled as
    that warning advises instead: without the attribute, then ``mj_setTotalmass`` and
    ``mj_setConst`` on the compiled model, which gives every array of the model exactly as
    the attribute does (tests/integration/test_mujoco.py), silently."""
    import gymnasium.envs.mujoco as assets

    mujoco = _mujoco()
    path = str(Path(assets.__file__).parent / "assets" / task.xml)
    spec = mujoco.MjSpec.from_file(path)
    for k, (pos, size) in enumerate(task.walls):  # static boxes of the world, as the
        wall = spec.worldbody.add_geom()  # file's own geoms (its default class)
        wall.name, wall.type = f"wall{k}", mujoco.mjtGeom.mjGEOM_BOX
        wall.pos, wall.size = pos, size
    total = spec.compiler.settotalmass
    if total <= 0:
        return spec.compile() if task.walls else mujoco.MjModel.from_xml_path(path)
    spec.compiler.settotalmass = -1
    model = spec.compile()
    mujoco.mj_setTotalmass(model, total)
    mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


def initial_state(task, init_qpos: np.ndarray, init_qvel: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(qpos, qvel)`` of a restart: gymnasium v5's ``reset_model`` noise, drawn from ``rng``
    (``np_random(seed)``) in its order."""
    noise = task.reset_noise
    qpos = init_qpos + rng.uniform(-noise, noise, size=len(init_qpos))
    if task.qvel_noise == "normal":
        return qpos, init_qvel + noise * rng.standard_normal(len(init_qvel))
    return qpos, init_qvel + rng.uniform(-noise, noise, size=len(init_qvel))


def check_task(env_id: str) -> str:
    if env_id not in TASKS:
        raise UnknownName("batched MuJoCo task", env_id, TASKS)
    return env_id


class MujocoSims:
    """``num_envs`` simulations of one task and their field buffers.

    Args:
        env_id: one of ``locomotion.TASKS`` (HalfCheetah-v5, Hopper-v5, ...).
        num_envs: simulations.
        threads: worker threads (0: one per CPU core this process may use).
        native: step through ``mjnative``'s C loop where it can be built (the same
            results, without the GIL); False: the Python loop.
    """

    def __init__(self, env_id: str, num_envs: int, threads: int = 0, native: bool = True):
        check_range("num_envs", num_envs, isinstance(num_envs, int) and num_envs >= 1, ">= 1")
        check_range("threads", threads, isinstance(threads, int) and threads >= 0, ">= 0")
        mujoco = _mujoco()
        self.env_id, self.task, self.num_envs = env_id, TASKS[check_task(env_id)], num_envs
        self.model = _model(self.task)
        self.datas = [mujoco.MjData(self.model) for _ in range(num_envs)]
        self.init_qpos = self.datas[0].qpos.copy()
        self.init_qvel = self.datas[0].qvel.copy()
        self.dt = self.model.opt.timestep * self.task.frame_skip
        names = ("qpos", "qvel", *self.task.fields)
        self.fields = {name: np.zeros((num_envs, *getattr(self.datas[0], name).shape))
                       for name in names}  # name -> [N, ...] float64, as last read
        # MjData arrays are views of the simulation's memory: pair them with their rows once.
        self._copies = [[(self.fields[name][i], getattr(d, name)) for name in names]
                        for i, d in enumerate(self.datas)]
        # What the task's functions read: the rows above (refreshed in place) and constants.
        self._view = {**self.fields, "body_mass": self.model.body_mass.copy()}
        self.rngs: list[np.random.Generator | None] = [None] * num_envs
        self.threads = threads or len(os.sched_getaffinity(0))
        # Only contact costs read cfrc_ext; other tasks skip computing it (it feeds nothing
        # back into the dynamics, so their results are the same bit for bit).
        self._post = "cfrc_ext" in self.task.fields
        self._native = (Stepper.create(self.model, self.datas, self._copies,
                                       self.task.frame_skip, self._post) if native else None)
        self._workers = ThreadPoolExecutor(self.threads, thread_name_prefix="neuroevo-mujoco")
        self._pending: tuple[list[Future], np.ndarray, np.ndarray, np.ndarray] | None = None
        self.obs_dim = self.observe().shape[1]

    @property
    def num_actions(self) -> int:
        return self.model.nu

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low, high = self.model.actuator_ctrlrange.astype(np.float32).T
        return low.copy(), high.copy()

    def observe(self) -> np.ndarray:
        """``[N, obs_dim]`` float64 observations of every env, from its last step or reset."""
        return self.task.observe(self._view)

    def reset(self, envs: np.ndarray, seeds) -> None:
        """Restart ``envs``; a seed re-seeds the env's generator, ``None`` continues it."""
        from gymnasium.utils.seeding import np_random

        mujoco, task = _mujoco(), self.task
        for i, seed in zip(envs, seeds, strict=True):
            if seed is not None or self.rngs[i] is None:
                self.rngs[i] = np_random(None if seed is None else int(seed))[0]
            d = self.datas[i]
            mujoco.mj_resetData(self.model, d)
            d.qpos[:], d.qvel[:] = initial_state(task, self.init_qpos, self.init_qvel,
                                                 self.rngs[i])
            mujoco.mj_forward(self.model, d)
            for dst, src in self._copies[i]:
                np.copyto(dst, src)

    def _run(self, envs: np.ndarray, actions: np.ndarray) -> None:
        if self._native is not None:
            return self._native.run(envs, actions)
        mujoco, model, skip, post = _mujoco(), self.model, self.task.frame_skip, self._post
        for i in envs:
            d = self.datas[i]
            np.copyto(d.ctrl, actions[i])
            mujoco.mj_step(model, d, nstep=skip)  # releases the GIL
            if post:
                mujoco.mj_rnePostConstraint(model, d)  # cfrc_ext, as gymnasium computes it
            for dst, src in self._copies[i]:
                np.copyto(dst, src)

    def step_async(self, actions: np.ndarray, envs: np.ndarray, inline: bool = False) -> None:
        """Start stepping ``envs`` with ``actions[env]`` (``[N, nu]``); returns at once unless
        ``inline``, where the calling thread steps one chunk itself (it would only wait)."""
        if self._pending is not None:
            raise StateError("step_async() twice without step_wait(); call step_wait() first")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs, self.model.nu):
            raise ConfigError(f"actions must have shape {(self.num_envs, self.model.nu)}, "
                              f"got {actions.shape}")
        before = np.array(self.task.position(self._view))
        chunks = [c for c in np.array_split(envs, self.threads) if len(c)]
        mine = chunks.pop() if inline and chunks else None
        futures = [self._workers.submit(self._run, c, actions) for c in chunks]
        if mine is not None:
            done: Future = Future()
            try:
                self._run(mine, actions)
                done.set_result(None)
            except Exception as e:  # reported by step_wait, with the other chunks
                done.set_exception(e)
            futures.append(done)
        self._pending = (futures, envs, actions, before)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray]:
        """Wait for the step; ``(reward [N], terminated [N])`` (rows not stepped: zeros)."""
        if self._pending is None:
            raise StateError("step_wait() without step_async(); call step_async() first")
        futures, envs, actions, before = self._pending
        self._pending = None
        wait(futures)  # every chunk has stopped writing before anything is raised
        for future in futures:
            if future.exception() is not None:
                e = future.exception()
                raise WorkerError(f"{self.env_id}: a MuJoCo worker failed: {e}") from e
        view, task = self._view, self.task
        speed = (task.position(view) - before) / self.dt
        healthy = task.healthy(view) if task.healthy is not None else None
        reward = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        reward[envs] = task.reward(speed, actions, view, healthy)[envs]
        if healthy is not None:
            terminated[envs] = ~healthy[envs]
        return reward, terminated

    def feet_contact(self, envs: np.ndarray) -> np.ndarray:
        """``[len(envs), feet]``: whether each foot (``locomotion.FEET``) touches anything now,
        a contact of one of its geoms at distance <= 0 (QDax's ``FeetContactWrapper``)."""
        out = np.zeros((len(envs), len(FEET[self.env_id])), dtype=bool)
        for row, i in enumerate(envs):
            contact = self.datas[i].contact
            feet = self._foot_of_geom[contact.geom[contact.dist <= 0].ravel()]
            out[row, feet[feet >= 0]] = True
        return out

    @functools.cached_property
    def _foot_of_geom(self) -> np.ndarray:
        """``[ngeom + 1]`` the foot (index in ``FEET``) each geom belongs to, else -1; the
        last entry is for a contact's geom -1 (a flex)."""
        lut = np.full(self.model.ngeom + 1, -1)
        for k, foot in enumerate(FEET[self.env_id]):
            body = foot if isinstance(foot, int) else self.model.body(foot).id
            lut[np.flatnonzero(self.model.geom_bodyid == body)] = k
        return lut

    def close(self) -> None:
        self._workers.shutdown(wait=True)


def max_steps(env_id: str) -> int:
    """gymnasium's time limit of the task (agent steps; a changed task: its base's)."""
    import gymnasium

    return gymnasium.spec(TASKS[check_task(env_id)].base or env_id).max_episode_steps


@functools.cache
def describe(env_id: str) -> tuple[int, np.ndarray, np.ndarray]:
    """``(obs_dim, action low, action high)`` of a task, read from its compiled model and one
    ``MjData`` (no simulations, no threads)."""
    mujoco, task = _mujoco(), TASKS[check_task(env_id)]
    model = _model(task)
    data = mujoco.MjData(model)
    fields = {name: np.asarray(getattr(data, name), np.float64)[None]
              for name in ("qpos", "qvel", *task.fields)}
    obs = task.observe({**fields, "body_mass": model.body_mass.copy()})
    low, high = model.actuator_ctrlrange.astype(np.float32).T
    return obs.shape[1], low.copy(), high.copy()


class MujocoPool(PoolBase):
    """``envs.base``'s protocol over ``MujocoSims``: seeded restarts, time limit, no autoreset.

    Episodes end at the task's termination or at gymnasium's ``max_episode_steps`` (1000).
    ``send`` returns at once; the worker threads step while the driver computes. With
    ``inline`` (an evaluator with one subset, which has nothing to compute meanwhile) the
    calling thread steps a chunk itself: with one thread, every env, and no hand-off.
    ``behaviour``: what ``behaviour(envs)`` measures, "auto" (the final mass centre) or
    "feet_contact" (each foot's share of the episode's steps in contact, counted after each
    step: QDax's ``get_feet_contact_proportion``).
    """

    def __init__(self, env_id: str, num_envs: int, threads: int = 0, inline: bool = False,
                 behaviour: str = "auto"):
        super().__init__(num_envs)
        self.sims = MujocoSims(env_id, num_envs, threads)
        self._contacts = (np.zeros((num_envs, len(FEET[env_id])), dtype=np.int64)
                          if behaviour == "feet_contact" else None)
        self.inline = inline  # send steps one chunk in the calling thread (and waits for it)
        self.max_steps = max_steps(env_id)
        self._elapsed = np.zeros(num_envs, dtype=np.int64)
        self._ended = np.ones(num_envs, dtype=bool)
        self._stepping: np.ndarray | None = None

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        envs = np.flatnonzero(mask)
        self.sims.reset(envs, seeds)
        self._ended[envs], self._elapsed[envs] = False, 0
        if self._contacts is not None:
            self._contacts[envs] = 0
        return self.sims.observe().astype(np.float32)

    def _send(self, actions: np.ndarray) -> None:
        self._stepping = np.flatnonzero(~self._ended)
        self.sims.step_async(actions, self._stepping, inline=self.inline)

    def _recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        envs, self._stepping = self._stepping, None
        rewards, terminated = self.sims.step_wait()
        self._elapsed[envs] += 1
        if self._contacts is not None:
            self._contacts[envs] += self.sims.feet_contact(envs)
        done = np.zeros(len(self._ended), dtype=bool)
        done[envs] = terminated[envs] | (self._elapsed[envs] >= self.max_steps)
        self._ended |= done
        return self.sims.observe().astype(np.float32), rewards, done

    def behaviour(self, envs: np.ndarray) -> np.ndarray:
        """``[len(envs), 2]`` the (x, y) of the mass-weighted centre of all bodies, as the
        episode left it: the BC of Conti et al. 2018 (their code's ``MujocoPolicy._get_pos``);
        with feet_contact, ``[len(envs), feet]`` each foot's share of the steps in contact."""
        if self._contacts is not None:
            steps = np.maximum(self._elapsed[envs], 1)[:, None]
            return (self._contacts[envs] / steps).astype(np.float32)
        mass = self.sims.model.body_mass
        return np.stack([mass @ self.sims.datas[i].xipos / mass.sum()
                         for i in envs])[:, :2].astype(np.float32)

    def close(self) -> None:
        self.sims.close()
