"""Any gymnasium environment, through gymnasium's own env classes: the generic fallback.

``GymPool`` steps its envs one after another in the driver thread (no simulator threads to
overlap with), which is fine for cheap classic-control tasks; the batched MuJoCo pools of
issue 4 are the fast path for locomotion. Episodes end at gymnasium's own termination and
time limit; each restart is seeded, as in ``AtariPool``.
"""

from __future__ import annotations

import functools

import numpy as np

from neuroevo.envs.base import PoolBase
from neuroevo.errors import ConfigError, DependencyNotInstalled, UnknownName
from neuroevo.spaces import ActionSpace


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


class GymPool(PoolBase):
    """``num_envs`` gymnasium envs behind ``envs.base``'s protocol, stepped in turn."""

    def __init__(self, env_id: str, num_envs: int):
        super().__init__(num_envs)
        gym = _gym()
        self.envs = [gym.make(check_env_id(env_id)) for _ in range(num_envs)]
        self._obs = np.zeros((num_envs, *self.envs[0].observation_space.shape),
                             dtype=np.float32)
        self._actions = None
        # Envs not started, or whose episode ended, are not stepped until their next reset
        # (gymnasium forbids stepping a finished episode); the evaluator ignores them.
        self._ended = np.ones(num_envs, dtype=bool)

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        for i, seed in zip(np.flatnonzero(mask), seeds, strict=True):
            self._obs[i] = self.envs[i].reset(seed=int(seed))[0]
            self._ended[i] = False
        return self._obs.copy()

    def _send(self, actions: np.ndarray) -> None:
        self._actions = actions

    def _recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


@functools.cache
def describe(env_id: str) -> tuple[tuple[int, ...], ActionSpace]:
    """``(obs_shape, action space)`` of a gymnasium env: one env is made to read them (a
    gymnasium env declares its spaces only once it exists), then closed."""
    gym = _gym()
    env = gym.make(check_env_id(env_id))
    try:
        space, obs = env.action_space, env.observation_space
        if isinstance(space, gym.spaces.Discrete):
            action = ActionSpace(n=int(space.n))
        elif isinstance(space, gym.spaces.Box):
            action = ActionSpace.box(space.low, space.high)
        else:
            raise ConfigError(f"{env_id} has a {type(space).__name__} action space; neuroevo "
                              "runs Discrete and Box action spaces")
        return tuple(obs.shape), action
    finally:
        env.close()
