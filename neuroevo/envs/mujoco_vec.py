"""``MujocoVectorEnv``: the batched MuJoCo tasks as a ``gymnasium.vector.VectorEnv``.

It behaves like ``gymnasium.make_vec(env_id, n, vectorization_mode="sync")``: ``reset(seed=s)``
seeds env ``i`` with ``s + i``, episodes are cut at the registered ``max_episode_steps``, and
autoreset is next-step (the step after an episode ends resets that env, returning its
first observation with reward 0). ``infos`` are empty dicts.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from neuroevo.envs.locomotion import TASKS
from neuroevo.envs.mujoco import MujocoSims, max_steps
from neuroevo.errors import ConfigError


class MujocoVectorEnv(VectorEnv):
    def __init__(self, env_id: str, num_envs: int, threads: int = 0, native: bool = True):
        self.sims = MujocoSims(env_id, num_envs, threads, native)
        self.num_envs = num_envs
        low, high = self.sims.action_bounds
        self.single_action_space = gymnasium.spaces.Box(low, high, dtype=np.float32)
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, shape=(self.sims.obs_dim,), dtype=np.float64)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP,
                         "render_fps": int(np.round(1.0 / self.sims.dt))}
        self.spec = gymnasium.spec(TASKS[env_id].base or env_id)
        self.max_episode_steps = max_steps(env_id)
        self._elapsed = np.zeros(num_envs, dtype=np.int64)
        self._autoreset = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed=None, options=None):
        n = self.num_envs
        seeds = [None] * n if seed is None else (
            [seed + i for i in range(n)] if isinstance(seed, int) else list(seed))
        if len(seeds) != n:
            raise ConfigError(f"reset(seed=...) needs {n} seeds (one per env), got {len(seeds)}")
        mask = np.ones(n, dtype=bool)
        if options and "reset_mask" in options:
            mask = np.asarray(options["reset_mask"], dtype=bool)
            if mask.shape != (n,):
                raise ConfigError(f"options['reset_mask'] must have shape ({n},), "
                                  f"got {mask.shape}")
        envs = np.flatnonzero(mask)
        self.sims.reset(envs, [seeds[i] for i in envs])
        self._elapsed[envs], self._autoreset[envs] = 0, False
        return self.sims.observe(), {}

    def step(self, actions):
        stepping, restarting = np.flatnonzero(~self._autoreset), np.flatnonzero(self._autoreset)
        self.sims.step_async(actions, stepping, inline=True)
        reward, terminated = self.sims.step_wait()
        self._elapsed[stepping] += 1
        truncated = np.zeros(self.num_envs, dtype=bool)
        truncated[stepping] = self._elapsed[stepping] >= self.max_episode_steps
        self.sims.reset(restarting, [None] * len(restarting))
        self._elapsed[restarting] = 0
        self._autoreset = terminated | truncated
        return self.sims.observe(), reward, terminated, truncated, {}

    def close_extras(self, **kwargs):
        self.sims.close()
