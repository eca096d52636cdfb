"""The one registry of env kinds: ``env_spec(cfg.env)`` says what a run's env is.

Which kind an env config names is decided here and nowhere else: a batched MuJoCo
locomotion task (``env.id`` in ``locomotion.TASKS``), the Hard Maze (``HardMaze-v0``,
``neuroevo.envs.maze``), an Atari game (``env.game``, or an ale-py id in ``env.id``:
``neuroevo.envs.ale_ids``), or any other gymnasium id (``env.id``). The spec carries what
the rest of a run needs to know without opening a pool: observation shape, action space,
frame skip, the episode cap, and ``make_pool``. It is a frozen, picklable value, so Ray
actors receive it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from neuroevo.envs.ale_ids import is_ale_id
from neuroevo.envs.ale_ids import settings as ale_settings
from neuroevo.envs.atari import (
    FROZEN_SCREEN_STEPS,
    OBS_SHAPE,
    AtariConfig,
    AtariPool,
    action_count,
)
from neuroevo.envs.atari_ram import RAM_SIZE
from neuroevo.envs.base import Pool
from neuroevo.envs.locomotion import FEET, TASKS
from neuroevo.envs.maze import ENV_ID as MAZE_ID
from neuroevo.spaces import ActionSpace

if TYPE_CHECKING:  # the config sits above the envs (it reads the algorithm registry)
    from neuroevo.config import EnvConfig



@dataclass(frozen=True)
class Kind:
    """What an env kind decides, in this one place: the rest of a run reads its spec's
    ``traits`` and never compares kind names."""

    name: str
    own_threads: bool  # its pools step on threads of their own (ale-py): on a CPU two
    # subsets overlap them with the driver; else one subset that the driver steps itself
    resets_itself: bool  # an ended env restarts on its own, with no reset call (ale-py)
    obs_norm: bool  # what env.obs_norm=auto means: on for the MuJoCo tasks (OpenAI-ES)
    action_noise: float | None  # env.action_noise's default in training (None: discrete)
    one_driver_for_small_nets: bool  # one CPU driver for a net of at most SMALL_NET
    # parameters, whose pool steps on every core (engine.parallel.default_workers)
    video: str | None  # what play records: "frames" (the observations), "camera" (MuJoCo's
    # renderer), "render" (gymnasium's rgb_array render), None (no renderer here)
    behaviour: str | None = None  # the built-in behaviour characterisation of an episode
    # (novelty search, MAP-Elites), read by the pool's ``behaviour(envs)``; None: none, the
    # Python API's ``behaviour=`` function gives one
    measures: str = "auto"  # what env.behaviour=auto resolves to where the algorithm reads
    # BCs: a setting that costs something is named in config.yaml (Atari's RAM replicas)
    train_episodes: int = 1  # what algo.train_episodes=0 resolves to (GA, RS, GA-NS): Atari
    # plays 2, whose scores are lotteries over at most 30 start states (neuroevo.optim.ga)


KINDS = {"atari": Kind("atari", own_threads=True, resets_itself=True, obs_norm=False,
                       action_noise=None, one_driver_for_small_nets=False, video="frames",
                       behaviour="the RAM when the episode ends", measures="ram",
                       train_episodes=2),
         "mujoco": Kind("mujoco", own_threads=False, resets_itself=False, obs_norm=True,
                        action_noise=0.01, one_driver_for_small_nets=True, video="camera",
                        behaviour="the final (x, y) of the mass-weighted centre of all bodies"),
         "gym": Kind("gym", own_threads=False, resets_itself=False, obs_norm=False,
                     action_noise=0.0, one_driver_for_small_nets=False, video="render"),
         "maze": Kind("maze", own_threads=False, resets_itself=False, obs_norm=False,
                      action_noise=0.0, one_driver_for_small_nets=False, video=None,
                      behaviour="the final (x, y)")}


@dataclass(frozen=True)
class EnvSpec:
    kind: str  # one of KINDS
    name: str  # the Atari game or the gymnasium id
    obs_shape: tuple[int, ...]
    action: ActionSpace
    frameskip: int  # emulator frames per agent step: frame counts are steps x frameskip
    episode_cap: int | None  # agent steps after which the evaluator cuts an episode
    max_steps: int | None  # the env's own limit in agent steps (None: Atari's 108k frames)
    atari: AtariConfig | None = None
    # False where every episode runs to the cap (HalfCheetah, Swimmer: no termination), so
    # that no slot frees up for a pass's later episodes until its wave ends
    terminates: bool = True
    behaviour: str = "auto"  # env.behaviour: what a MuJoCo pool measures of an episode

    @property
    def traits(self) -> Kind:
        return KINDS[self.kind]

    @property
    def behaviour_dims(self) -> int | None:
        """The dimensions of the built-in behaviour characterisation (None: none)."""
        if self.kind == "maze":
            return 2
        if self.kind == "mujoco":
            return len(FEET[self.name]) if self.behaviour == "feet_contact" else 2
        if self.kind == "atari" and self.atari.ram:
            return RAM_SIZE
        return None

    @property
    def image(self) -> bool:
        return len(self.obs_shape) == 3

    def make_pool(self, num_envs: int, threads: int = 0, inline: bool = False) -> Pool:
        """``num_envs`` envs of this spec; ``threads`` simulator threads (0: the kind's
        default; gymnasium envs step in the calling thread); ``inline``: MuJoCo's ``send``
        steps in the calling thread too (ale-py's threads are its own)."""
        if self.kind == "atari":
            return AtariPool(self.atari, num_envs, threads)
        if self.kind == "mujoco":
            from neuroevo.envs.mujoco import MujocoPool

            return MujocoPool(self.name, num_envs, threads, inline, self.behaviour)
        if self.kind == "maze":
            from neuroevo.envs.maze import MazePool

            return MazePool(num_envs)
        from neuroevo.envs.gym import GymPool

        return GymPool(self.name, num_envs)


def env_spec(env: EnvConfig) -> EnvSpec:
    """The spec of the env ``env`` configures (an unknown game or id is a one-line error)."""
    cap = env.episode_cap or None
    if env.id in TASKS:
        from neuroevo.envs.mujoco import describe, max_steps

        obs_dim, low, high = describe(env.id)
        return EnvSpec("mujoco", env.id, (obs_dim,), ActionSpace.box_of(low, high), 1, cap,
                       max_steps(env.id), terminates=TASKS[env.id].healthy is not None,
                       behaviour=env.behaviour)
    if env.id == MAZE_ID:
        from neuroevo.envs.maze import ACTION, OBS_SIZE, STEPS

        return EnvSpec("maze", env.id, (OBS_SIZE,), ACTION, 1, cap, STEPS)
    if env.id and is_ale_id(env.id):
        return _atari(env, **ale_settings(env.id))
    if env.id:
        import gymnasium

        from neuroevo.envs.gym import describe

        obs_shape, action = describe(env.id)
        return EnvSpec("gym", env.id, obs_shape, action, 1, cap,
                       gymnasium.spec(env.id).max_episode_steps)
    return _atari(env, env.game, env.sticky_actions, env.frameskip, env.full_action_space,
                  env.noop_max, env.fire_reset)


def _atari(env: EnvConfig, game: str, sticky_actions: float, frameskip: int,
           full_action_space: bool, noop_max: int, fire_reset: bool) -> EnvSpec:
    """An Atari game's spec: ``env.game``'s, or an ale-py id's settings (``ale_ids``)."""
    cap = env.episode_cap or None
    # None: the quick defaults, on (the paper configs turn them off; neuroevo.envs.atari)
    fire = True if env.fire_on_life_loss is None else env.fire_on_life_loss
    frozen = (FROZEN_SCREEN_STEPS if env.fire_on_frozen_screen is None
              else env.fire_on_frozen_screen)
    atari = AtariConfig(game, sticky_actions=sticky_actions, noop_max=noop_max,
                        frameskip=frameskip, full_action_space=full_action_space,
                        fire_reset=fire_reset, episode_cap=cap, fire_on_life_loss=fire,
                        fire_on_frozen_screen=frozen, ram=env.behaviour == "ram")
    return EnvSpec("atari", game, OBS_SHAPE,
                   ActionSpace(n=action_count(game, full_action_space)),
                   frameskip, cap, None, atari)
