"""Any gymnasium environment, through gymnasium's own env classes: the generic fallback.

``GymPool`` steps its envs one after another in the driver thread (no simulator threads to
overlap with), which is fine for cheap classic-control tasks; the batched MuJoCo pools of
issue 4 are the fast path for locomotion. Episodes end at gymnasium's own termination and
time limit; each restart is seeded, as in ``AtariPool``.
"""

from __future__ import annotations

import numpy as np

from neuroevo.errors import DependencyNotInstalled, StateError, UnknownName, check_range


def _gym():
    try:
        import gymnasium
    except ImportError as e:  # pragma: no cover - gymnasium is a declared dependency
        raise DependencyNotInstalled("gymnasium envs need gymnasium: pip install gymnasium") from e
    return gymnasium


def check_env_id(env_id: str) -> str:
    registry = _gym().envs.registry
    if env_id not in registry:
        raise UnknownName("gymnasium env id", env_id, registry.keys())
    return env_id


class GymPool:
    """``num_envs`` gymnasium envs behind the pool protocol (``reset(mask, seeds)``, send, recv)."""

    def __init__(self, env_id: str, num_envs: int):
        check_range("num_envs", num_envs, num_envs >= 1, ">= 1")
        gym = _gym()
        self.envs = [gym.make(check_env_id(env_id)) for _ in range(num_envs)]
        space = self.envs[0].action_space
        self.obs_shape = self.envs[0].observation_space.shape
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if self.discrete:
            self.num_actions = int(space.n)
        else:
            self.num_actions = int(np.prod(space.shape))
            self.action_low, self.action_high = space.low, space.high
        self._obs = np.zeros((num_envs, *self.obs_shape), dtype=np.float32)
        self._actions = None
        # Envs not started, or whose episode ended, are not stepped until their next reset
        # (gymnasium forbids stepping a finished episode); the evaluator ignores them.
        self._ended = np.ones(num_envs, dtype=bool)

    def reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        if self._actions is not None:
            raise StateError("GymPool.reset() while a step is in flight; call recv() first")
        for i, seed in zip(np.flatnonzero(mask), seeds, strict=True):
            self._obs[i] = self.envs[i].reset(seed=int(seed))[0]
            self._ended[i] = False
        return self._obs.copy()

    def send(self, actions: np.ndarray) -> None:
        if self._actions is not None:
            raise StateError("GymPool.send() twice without recv(); call recv() first")
        self._actions = actions

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._actions is None:
            raise StateError("GymPool.recv() without send(); call send(actions) first")
        rewards = np.zeros(len(self.envs))
        done = np.zeros(len(self.envs), dtype=bool)
        for i, (env, action) in enumerate(zip(self.envs, self._actions, strict=True)):
            if self._ended[i]:
                continue
            obs, reward, terminated, truncated, _ = env.step(action)
            self._obs[i], rewards[i], done[i] = obs, reward, terminated or truncated
            self._ended[i] = done[i]
        self._actions = None
        return self._obs.copy(), rewards, done

    def close(self) -> None:
        for env in self.envs:
            env.close()
