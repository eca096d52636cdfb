"""Any gymnasium environment, through gymnasium's own env classes: the generic fallback.

``GymPool`` steps its envs one after another in the driver thread (no simulator threads to
overlap with), which is fine for cheap classic-control tasks; the batched MuJoCo pools of
issue 4 are the fast path for locomotion. Episodes end at gymnasium's own termination and
time limit; each restart is seeded, as in ``AtariPool``.

Every space gymnasium defines reaches the network as a flat float32 vector, through
``gymnasium.spaces.flatten``: a Box is raveled (infinite bounds included; images too, so a
pixel env trains the MLP), Discrete becomes a one-hot of ``n`` (offset by its ``start``),
MultiDiscrete the concatenated one-hots of its dimensions, MultiBinary its bits, and Tuple
and Dict the concatenation of their parts in the space's own order: a Tuple's, and a Dict's
keys as gymnasium keeps them (sorted, unless the env built it from an OrderedDict).
Text, Graph, Sequence and OneOf have no fixed-size vector and are refused in one line.

Actions: Discrete (one logit each, argmax, plus ``start``), MultiDiscrete and MultiBinary
(an argmax over each dimension's own logits), Box (one output each, clipped to the bounds).
Tuple and Dict actions are refused in one line.
"""

from __future__ import annotations

import functools

import numpy as np

from neuroevo.envs.base import PoolBase
from neuroevo.errors import ConfigError, DependencyNotInstalled, UnknownName
from neuroevo.spaces import ActionSpace

# gymnasium env families whose dependencies neuroevo declares as extras (setup.cfg)
EXTRAS = {"gymnasium.envs.box2d": ("box2d", "Box2D and pygame"),
          "gymnasium.envs.phys2d": ("jax", "jax and flax"),
          "gymnasium.envs.tabular": ("jax", "jax and flax")}
UNFLATTENABLE = ("Text", "Graph", "Sequence", "OneOf")


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


def _make(env_id: str, **kwargs):
    """``gymnasium.make(env_id, **kwargs)``, with a missing dependency as one line naming
    the fix."""
    gym = _gym()
    entry = str(gym.spec(check_env_id(env_id)).entry_point)
    if "_raise_" in entry:  # gymnasium registers these ids only to explain their removal
        which = "mujoco-py (use the v5 id)" if "mujoco_py" in entry else "the old gym (shimmy)"
        raise ConfigError(f"{env_id} is a gymnasium placeholder for an env of {which}, which "
                          "gymnasium no longer runs; pick another id")
    try:
        return gym.make(env_id, **kwargs)
    except (ImportError, gym.error.DependencyNotInstalled) as e:
        extra = next((v for k, v in EXTRAS.items() if entry.startswith(k)), None)
        if extra is None:  # not a family neuroevo declares: gymnasium's own words
            raise DependencyNotInstalled(f"{env_id} cannot start here: "
                                         f"{str(e).splitlines()[0]}") from None
        verb = "are" if " and " in extra[1] else "is"
        raise DependencyNotInstalled(
            f"{env_id} needs {extra[1]}, which {verb} not installed: pip install -e "
            f"'.[{extra[0]}]' in the neuroevo checkout (or pip install 'neuroevo[{extra[0]}]')"
        ) from None


def _check_observations(env_id: str, space) -> None:
    names = {type(s).__name__ for s in _leaves(space)}
    bad = sorted(names & set(UNFLATTENABLE))
    if bad:
        raise ConfigError(f"{env_id} observes a {bad[0]} space, which has no fixed-size vector "
                          f"for a network; neuroevo runs Box, Discrete, MultiDiscrete, "
                          f"MultiBinary, and Tuples and Dicts of them")


def _leaves(space):
    """``space`` and every space inside it."""
    yield space
    inner = getattr(space, "spaces", ())  # Tuple's tuple, Dict's dict
    for s in inner.values() if isinstance(inner, dict) else inner:
        yield from _leaves(s)


def action_space(env_id: str, space) -> ActionSpace:
    spaces = _gym().spaces
    if isinstance(space, spaces.Discrete):
        return ActionSpace(n=int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return ActionSpace(nvec=tuple(int(v) for v in np.ravel(space.nvec)))
    if isinstance(space, spaces.MultiBinary):
        return ActionSpace(nvec=(2,) * int(np.prod(space.shape)))
    if isinstance(space, spaces.Box):
        return ActionSpace.box_of(space.low, space.high)
    raise ConfigError(f"{env_id} has a {type(space).__name__} action space; neuroevo runs "
                      "Discrete, MultiDiscrete, MultiBinary and Box action spaces")


def env_action(space):
    """The function from one engine action (``ActionSpace.shape``) to the action ``space``
    takes: offset by a discrete space's ``start``, in the space's own shape and dtype."""
    spaces = _gym().spaces
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return lambda a: int(a) + start
    if isinstance(space, spaces.MultiDiscrete):
        return lambda a: (np.reshape(a, space.shape) + space.start).astype(space.dtype)
    return lambda a: np.reshape(a, space.shape).astype(space.dtype)


class GymPool(PoolBase):
    """``num_envs`` gymnasium envs behind ``envs.base``'s protocol, stepped in turn;
    ``render``: made with ``render_mode="rgb_array"`` (``neuroevo play --video``), where
    ``frame()`` is env 0's picture."""

    def __init__(self, env_id: str, num_envs: int, render: bool = False):
        super().__init__(num_envs)
        if render:
            probe = _make(env_id)
            modes = probe.metadata.get("render_modes", [])
            probe.close()
            if "rgb_array" not in modes:
                raise ConfigError(f"{env_id} draws no rgb_array pictures (its render modes: "
                                  f"{', '.join(modes) or 'none'}); leave --video out")
        self.envs = [_make(env_id, **({"render_mode": "rgb_array"} if render else {}))
                     for _ in range(num_envs)]
        self.obs_space = self.envs[0].observation_space
        self._env_action = env_action(self.envs[0].action_space)
        size = _gym().spaces.flatdim(self.obs_space)
        self._obs = np.zeros((num_envs, size), dtype=np.float32)  # flattened (module doc)
        self._actions = None
        # Envs not started, or whose episode ended, are not stepped until their next reset
        # (gymnasium forbids stepping a finished episode); the evaluator ignores them.
        self._ended = np.ones(num_envs, dtype=bool)

    def _flat(self, obs) -> np.ndarray:
        return _gym().spaces.flatten(self.obs_space, obs)

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        for i, seed in zip(np.flatnonzero(mask), seeds, strict=True):
            self._obs[i] = self._flat(self.envs[i].reset(seed=int(seed))[0])
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
            obs, reward, terminated, truncated, _ = env.step(self._env_action(action))
            self._obs[i], rewards[i] = self._flat(obs), reward
            done[i] = self._ended[i] = terminated or truncated
        self._actions = None
        return self._obs.copy(), rewards, done

    def frame(self) -> np.ndarray:
        """Env 0's picture, ``[H, W, 3]`` uint8 (a pool made with ``render``)."""
        try:
            return self.envs[0].render()
        except (ImportError, _gym().error.DependencyNotInstalled) as e:
            raise DependencyNotInstalled(f"drawing {self.envs[0].spec.id} needs what "
                                         f"gymnasium names: {str(e).splitlines()[0]}") from None

    @property
    def fps(self) -> int:
        """Real time for a video of ``frame()``s: the env's own ``render_fps``."""
        return int(self.envs[0].metadata.get("render_fps") or 30)

    def close(self) -> None:
        for env in self.envs:
            env.close()


@functools.cache
def describe(env_id: str) -> tuple[tuple[int, ...], ActionSpace]:
    """``(obs_shape, action space)`` of a gymnasium env, as the network sees them: one env
    is made to read them (a gymnasium env declares its spaces only once it exists), then
    closed."""
    env = _make(env_id)
    try:
        _check_observations(env_id, env.observation_space)
        action = action_space(env_id, env.action_space)
        return (_gym().spaces.flatdim(env.observation_space),), action
    finally:
        env.close()
