"""The batched MuJoCo locomotion tasks on MuJoCo Warp: every world's state stays on one device.

``WarpSims`` holds ``nworld`` worlds of one task in a ``mujoco_warp`` Data on the torch
device's Warp twin (``cpu`` or ``cuda:N``). Its fields are read through zero-copy torch
views (``warp.to_torch``) and kept as float64 tensors of the same names as
``MujocoSims.fields``, so ``locomotion.TASKS``' own functions compute observations, rewards
and terminations with torch on the device: one definition of each task for both sims.

A step is what gymnasium's is: ``frame_skip`` physics steps with ``ctrl`` held, then
``rne_postconstraint`` where the task reads ``cfrc_ext``. A restart is ``reset_data`` on the
restarting worlds, gymnasium's initial-state noise (drawn on the host from the episode's
seed, once per episode: ``mujoco.initial_state``) and a ``forward``. The forward runs on
every world, but it writes no state that a step reads (only the integrators write the warm
start), and the other worlds' field tensors keep what their last step left, so a world's
episode does not depend on when its neighbours restart.

Where it differs from MuJoCo C (``MujocoSims``): float32 physics; and Humanoid's PGS solver,
which MuJoCo Warp does not implement, is replaced by Newton (MuJoCo's default), which solves
the same convex problem. tests/integration/test_warp.py measures both against the native
envs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import torch

from neuroevo.envs.locomotion import TASKS, V5_TASKS
from neuroevo.envs.mujoco import _model, check_task
from neuroevo.errors import ConfigError, DependencyNotInstalled, check_range

INSTALL = "pip install -e '.[warp]'"


@contextlib.contextmanager
def _no_stderr(quiet: bool):
    """Silence file descriptor 2 (native libraries' prints) while ``quiet``."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def warp_modules():
    """``(warp, mujoco_warp)``, initialised quietly; missing: a one-line error naming the
    extra."""
    try:
        import warp
    except ImportError as e:
        raise DependencyNotInstalled(f"--sim warp needs MuJoCo Warp: {INSTALL} "
                                     f"(mujoco-warp and warp-lang; {e})") from None
    warp.config.log_level = warp.LOG_ERROR  # else a greeting and a line per module
    # Warp's native library warns that it finds no CUDA driver on a machine without one.
    with _no_stderr(not torch.cuda.is_available()):
        try:
            import mujoco_warp
        except ImportError as e:
            raise DependencyNotInstalled(f"--sim warp needs MuJoCo Warp: {INSTALL} "
                                         f"(mujoco-warp and warp-lang; {e})") from None
        warp.init()
    return warp, mujoco_warp


def _marker(warp, mjw, wp_device: str) -> Path:
    """The file that says this Warp cache holds MuJoCo Warp's kernels for ``wp_device``."""
    return (Path(warp.config.kernel_cache_dir)
            / f"neuroevo-mujoco_warp-{mjw.__version__}-{wp_device.split(':')[0]}.compiled")


def compile_notice(device: torch.device) -> str | None:
    """The line a first run prints before MuJoCo Warp compiles its kernels for ``device``
    (None once they are in Warp's kernel cache: ``WarpSims`` marks it after a first step)."""
    warp, mjw = warp_modules()
    if _marker(warp, mjw, warp_device(device)).exists():
        return None
    where = "a CPU: about 1-2 minutes" if device.type == "cpu" else "a GPU: about a minute"
    return (f"MuJoCo Warp compiles its kernels once for this machine ({where}); they are "
            f"cached in {warp.config.kernel_cache_dir}")


def _data_bytes(warp, data) -> int:
    """Bytes of the Warp arrays a ``mujoco_warp`` Data (or Model) holds, nested ones too."""
    total = 0
    for value in vars(data).values():
        if isinstance(value, warp.array):
            total += value.capacity
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            total += _data_bytes(warp, value)
    return total


def memory_need(env_id: str, nworld: int) -> int:
    """Device bytes of ``nworld`` worlds of a task's Data: measured at one and two worlds on
    Warp's CPU device (every per-world array grows linearly) and extrapolated."""
    warp, mjw = warp_modules()
    model = _warp_model(TASKS[check_task(env_id)])
    with warp.ScopedDevice("cpu"):
        one, two = (_data_bytes(warp, mjw.make_data(model, nworld=n)) for n in (1, 2))
    return one + (two - one) * (nworld - 1)


def warp_device(device: torch.device) -> str:
    """The Warp device that shares memory with the torch ``device``."""
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


def _warp_model(task):
    """The task's ``MjModel`` as MuJoCo Warp runs it (PGS, which it lacks, becomes Newton)."""
    import mujoco

    model = _model(task)
    if model.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return model


class WarpSims:
    """``nworld`` worlds of one task (``locomotion.TASKS``) on ``device``.

    ``fields``: name -> ``[nworld, ...]`` float64 tensors, as the last step or restart of each
    world left them (the names of ``MujocoSims.fields``; ``keep`` adds more). ``step`` and
    ``reset`` take and give tensors on ``device``; nothing crosses to the host but what
    ``reset`` is given.
    """

    def __init__(self, env_id: str, nworld: int, device: torch.device,
                 keep: tuple[str, ...] = ()):
        check_range("nworld", nworld, isinstance(nworld, int) and nworld >= 1, ">= 1")
        if env_id not in V5_TASKS:
            raise ConfigError(f"--sim warp runs the MuJoCo v5 locomotion tasks "
                              f"({', '.join(V5_TASKS)}), not {env_id!r}; use --sim native")
        import mujoco

        self.warp, self.mjw = warp_modules()
        self.env_id, self.task, self.nworld = env_id, TASKS[env_id], nworld
        self.device, self.wp_device = device, warp_device(device)
        self.mj_model = _warp_model(self.task)
        first = mujoco.MjData(self.mj_model)
        self.init_qpos, self.init_qvel = first.qpos.copy(), first.qvel.copy()
        self.dt = self.mj_model.opt.timestep * self.task.frame_skip
        with self.warp.ScopedDevice(self.wp_device):
            self.model = self.mjw.put_model(self.mj_model)
            # stable contact and constraint order: a world's physics does not depend on the
            # others' (GPU atomics would order them by timing)
            self.model.opt.deterministic = int(sum(self.mjw.DeterminismType))
            self.data = self.mjw.make_data(self.mj_model, nworld=nworld)
        names = dict.fromkeys(("qpos", "qvel", *self.task.fields, *keep))
        self._views = {name: self._view(name) for name in (*names, "ctrl")}
        self.fields = {name: self._views[name].double().clone() for name in names}
        self._f = {**self.fields,
                   "body_mass": torch.tensor(self.mj_model.body_mass, dtype=torch.float64,
                                             device=device)}
        self._post = "cfrc_ext" in self.task.fields  # as MujocoSims: only contact costs
        low, high = self.mj_model.actuator_ctrlrange.T
        self.action_low = torch.tensor(low, dtype=torch.float64, device=device)
        self.action_high = torch.tensor(high, dtype=torch.float64, device=device)
        self._all = torch.ones(nworld, dtype=torch.bool, device=device)
        self._compiled = False
        self._graph = None
        self._capture()

    def _view(self, name: str) -> torch.Tensor:
        """``[nworld, n, width]`` (or ``[nworld, n]``) zero-copy view of a Data field."""
        return self.warp.to_torch(getattr(self.data, name))

    @contextlib.contextmanager
    def _scope(self):
        """Warp's device, and on a GPU torch's current stream: Warp's kernels and torch's
        ops on the fields run in one order, with no synchronisation between them."""
        with self.warp.ScopedDevice(self.wp_device):
            if self.device.type != "cuda":
                yield
                return
            stream = self.warp.stream_from_torch(torch.cuda.current_stream(self.device))
            with self.warp.ScopedStream(stream):
                yield

    def _run(self, fn, *args) -> None:
        with self._scope():
            fn(self.model, self.data, *args)

    def _physics(self) -> None:
        """gymnasium's step: ``frame_skip`` physics steps, then ``cfrc_ext`` if read."""
        for _ in range(self.task.frame_skip):
            self._run(self.mjw.step)
        if self._post:
            self._run(self.mjw.rne_postconstraint)

    def _capture(self) -> None:
        """On a GPU, the physics of a step as one CUDA graph on torch's stream (replayed by
        ``step``); on the CPU it runs kernel by kernel."""
        if self.device.type != "cuda":
            return
        self._physics()  # compiles and loads every kernel before the capture
        with self._scope(), self.warp.ScopedCapture() as capture:
            self._physics()
        self._graph = capture.graph

    def _read(self, worlds: torch.Tensor) -> None:
        """Copy the fields of ``worlds`` (``[nworld]`` bool) into ``fields``, in place."""
        for name, dst in self.fields.items():
            src = self._views[name].double()
            keep = worlds.view(-1, *([1] * (dst.dim() - 1)))
            dst.copy_(torch.where(keep, src, dst))

    def observe(self) -> torch.Tensor:
        """``[nworld, obs_dim]`` float64 observations of every world."""
        return self.task.observe(self._f)

    def behaviour(self) -> torch.Tensor:
        """``[nworld, 2]`` the (x, y) of the mass-weighted centre of all bodies of each world
        (``MujocoPool.behaviour``'s BC, from the last step or restart; needs ``keep`` to
        hold ``xipos`` where the task does not read it)."""
        mass, xipos = self._f["body_mass"], self._f["xipos"]
        return (torch.einsum("b,nbj->nj", mass, xipos) / mass.sum())[:, :2]

    def reset(self, worlds: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Restart ``worlds`` (``[nworld]`` bool) at ``qpos`` and ``qvel`` (``[nworld, nq]``,
        ``[nworld, nv]``; rows of other worlds are not read)."""
        self._run(self.mjw.reset_data, self.warp.from_torch(worlds))
        rows = worlds[:, None]
        for name, value in (("qpos", qpos), ("qvel", qvel)):
            view = self._views[name]
            view.copy_(torch.where(rows, value.to(view.dtype), view))
        self._run(self.mjw.forward)
        self._read(worlds)

    def step(self, actions: torch.Tensor, worlds: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Step every world with ``actions`` (``[nworld, nu]``); ``worlds``: those whose
        fields to update (None: all). Returns ``(reward, terminated)``, ``[nworld]`` each."""
        worlds = self._all if worlds is None else worlds
        task, f = self.task, self._f
        before = task.position(f).clone()
        self._views["ctrl"].copy_(actions)
        if self._graph is not None:
            with self._scope():
                self.warp.capture_launch(self._graph)
        else:
            self._physics()
        self._read(worlds)
        if not self._compiled:
            self._compiled = True
            _marker(self.warp, self.mjw, self.wp_device).touch()
        speed = (task.position(f) - before) / self.dt
        healthy = task.healthy(f) if task.healthy is not None else None
        # the control cost in the actions' own precision (float32), as MujocoPool's
        reward = task.reward(speed, actions, f, healthy)
        terminated = ~healthy if healthy is not None else torch.zeros_like(worlds)
        return reward, terminated
