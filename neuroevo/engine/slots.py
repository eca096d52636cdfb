"""Slot bookkeeping for one subset: which member each env runs, its return and steps, and
which parameter row holds its network.

Rows ``[0, count)`` hold exactly the networks of the running episodes, so a forward pass
reads a prefix of the parameter storage in place. Envs and rows are mapped both ways.
"""

from __future__ import annotations

import numpy as np
import torch

from neuroevo.genomes import PHASES
from neuroevo.noise import mix64, mix64_array, mix64_tensor, shift_right, signed64

IDLE = -1
_U64 = np.uint64


_LANE = 0xD1B54A32D192ED03


def step_normals(seeds: np.ndarray, steps: np.ndarray, dim: int) -> np.ndarray:
    """``[N, dim]`` standard normal draws keyed by (episode seed, step, component) alone.

    Counter-based (hash, then Box-Muller), so an episode's action noise is the same whichever
    slot, subset or thread runs it, and no generator state travels with the slot.
    """
    key = mix64_array(seeds.astype(_U64) ^ mix64_array(steps.astype(_U64)))  # [N]
    lanes = np.arange(1, 2 * dim + 1, dtype=_U64) * _U64(_LANE)
    bits = mix64_array(key[:, None] + lanes[None, :])  # [N, 2 * dim]
    u = ((bits >> _U64(11)).astype(np.float64) + 0.5) * 2.0**-53  # uniform in (0, 1)
    return np.sqrt(-2.0 * np.log(u[:, :dim])) * np.cos(2.0 * np.pi * u[:, dim:])


def step_normals_tensor(seeds: torch.Tensor, steps: torch.Tensor, dim: int) -> torch.Tensor:
    """``step_normals`` on the seeds' device (int64 ``[N]`` each): the same bits, the same
    uniforms; the normals equal to within libm's last bits (torch's log and cos)."""
    key = mix64_tensor(seeds ^ mix64_tensor(steps))  # [N]
    lanes = torch.arange(1, 2 * dim + 1, dtype=torch.int64, device=seeds.device) * signed64(_LANE)
    bits = mix64_tensor(key[:, None] + lanes[None, :])  # [N, 2 * dim]
    u = (shift_right(bits, 11).double() + 0.5) * 2.0**-53  # uniform in (0, 1)
    return torch.sqrt(-2.0 * torch.log(u[:, :dim])) * torch.cos(2.0 * torch.pi * u[:, dim:])


def episode_seed(run_seed: int, generation: int, phase: str, index: int) -> int:
    """The env seed of one evaluation: a function of what is evaluated, never of the slot.
    Each phase has its own range of seeds (train [0, 2^29), validate [2^29, 2^30), test
    [2^30, 3 * 2^29)), so test episodes never replay a training or validation episode."""
    code = PHASES.index(phase)
    h = mix64(run_seed)
    for part in (generation, code, index):
        h = mix64(h ^ part)
    return (code << 29) | (h % (1 << 29))


class Slots:
    """Per-env state of a subset; vectorised updates, a Python loop over finished envs only."""

    def __init__(self, num_envs: int):
        self.member = np.full(num_envs, IDLE, dtype=np.int64)  # [envs] population index
        self.ret = np.zeros(num_envs, dtype=np.float64)  # [envs] episode return so far
        self.steps = np.zeros(num_envs, dtype=np.int64)  # [envs] agent steps so far
        self.row_of = np.arange(num_envs)  # [envs] parameter row of each env
        self.env_of = np.arange(num_envs)  # [rows] env of each parameter row
        self.count = 0  # rows [0, count) are the running episodes

    @property
    def active(self) -> np.ndarray:
        return self.member != IDLE

    def _swap_rows(self, env: int, row: int) -> int:
        """Put ``env`` at ``row`` and the env that was there at ``env``'s old row."""
        old, other = self.row_of[env], self.env_of[row]
        self.row_of[env], self.env_of[row] = row, env
        self.row_of[other], self.env_of[old] = old, other
        return old

    def start(self, env: int, member: int) -> int:
        """Give ``env`` a new episode of ``member``; returns the row to load its network into."""
        if self.member[env] == IDLE:
            self._swap_rows(env, self.count)
            self.count += 1
        self.member[env], self.ret[env], self.steps[env] = member, 0.0, 0
        return int(self.row_of[env])

    def stop(self, env: int) -> tuple[int, int] | None:
        """Idle ``env``; returns ``(src, dst)`` rows to move a network by, or None."""
        self.count -= 1
        last = self.count
        freed = self._swap_rows(env, last)
        self.member[env] = IDLE
        return (last, int(freed)) if freed != last else None

    def step(self, rewards: np.ndarray, done: np.ndarray, cap: int | None) -> np.ndarray:
        """Add a step's rewards to the running episodes; return the envs whose episode ended."""
        active = self.active
        self.ret[active] += rewards[active]
        self.steps[active] += 1
        ended = done.copy()
        if cap is not None:
            ended |= self.steps >= cap
        return np.flatnonzero(ended & active)
