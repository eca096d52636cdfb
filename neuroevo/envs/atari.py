"""Atari through ale-py with the Deep GA protocol (Such et al. 2017; REFERENCE section 4).

``AtariPool`` drives one ``ale_py.vector_env.AtariVectorEnv`` in synchronous mode: its C++
thread pool steps every env and ``send``/``recv`` release the GIL, so the driver thread
computes another pool's forward pass meanwhile. Synchronous mode is what allows partial
resets with a chosen seed (``batch_size == num_envs``). Protocol: sticky actions off (0.25
optional), max over the last 2 frames, grayscale 84x84, stack of 4, frame skip 4, no reward
clipping (fitness is the game score), no life-loss termination.

``fire_on_life_loss`` (off in the paper protocol, on in the quick defaults) presses FIRE on
the step after a life is lost, in place of the policy's action, in games whose action set
has FIRE. Breakout, among others, waits for FIRE after every lost life: a deterministic
policy that does not press it sees a frozen screen, keeps choosing the same action and idles
to the episode cap, so most of a random population's frames went to frozen screens
(``experiments/fire/``). It is a deviation from the papers, which press FIRE at reset only;
the step counts like any other (its frames, its reward).

``fire_on_frozen_screen`` (0: off, the paper protocol; 30 agent steps in the quick defaults)
presses FIRE once the newest frame has not changed for that many steps, and again after as
many more. Bowling (no lives), gopher and riverraid wait for FIRE where ale-py reports no
lost life (``scripts/fire_probe.py``): 8 of 24 random members idled there to the cap with
only the life-loss rule (``experiments/fire/``). An unchanged frame for 2 s of game time (30
steps of 4 frames) is a game waiting for input; it is a deviation from the papers too.

Start states differ from the paper's. Such et al. (and Uber's code) play 1-30 random no-op
frames and then FIRE. ale-py's reset (``preprocessed_env.cpp``, 0.12.1) presses FIRE first,
where the game's action set has it, and then plays ``max(0, U(0, noop_max - 1) - 1)`` no-op
frames: 0-28 for ``noop_max`` 30, none twice as often as any other count (games without
FIRE: ``U(0, noop_max - 1)``, 0-29). The pool cannot replay the paper's order: single frames
exist only inside that C++ reset, and ``send`` steps every env of the vector by whole agent
steps. The order matters: with sticky actions off the emulator is deterministic, so a
deterministic policy's episode is fixed by its start state, and breakout's 29 ale-py starts
and the paper's 30 are different screens (``tests/integration/test_atari_start.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from neuroevo.envs.atari_ram import RamReplicas
from neuroevo.envs.base import PoolBase
from neuroevo.errors import (
    ConfigError,
    DependencyNotInstalled,
    StateError,
    UnknownName,
    check_range,
)


def _ale():
    try:
        import ale_py
        import ale_py.roms
        import ale_py.vector_env
    except ImportError as e:  # pragma: no cover - ale-py is a declared dependency
        raise DependencyNotInstalled("Atari needs ale-py: pip install ale-py") from e
    return ale_py


# ROMs that ale-py ships with no single-player mode: loading one ends the process from C++
# (ale-py 0.12.1 registers no id for them either, ``ale_py/registration.py``).
MULTIPLAYER_ONLY = ("combat", "joust", "maze_craze", "warlords")


def games() -> list[str]:
    """ROM ids that ale-py ships and plays single-player (snake_case: ``ms_pacman``, ...)."""
    return [g for g in _ale().roms.get_all_rom_ids() if g not in MULTIPLAYER_ONLY]


def check_game(game: str) -> str:
    if game in MULTIPLAYER_ONLY:
        raise ConfigError(f"Atari game {game!r} has no single-player mode in ale-py (its ROM "
                          "is multiplayer only); pick another game")
    if game not in games():
        raise UnknownName("Atari game", game, games())
    return game


@dataclass(frozen=True)
class AtariConfig:
    """The emulator protocol; the defaults are the Deep GA paper's."""

    game: str = "breakout"
    sticky_actions: float = 0.0  # 0.25 for the "v5" protocol of Machado et al.
    noop_max: int = 30  # ale-py: FIRE, then U(0, noop_max - 1) - 1 no-op frames (module doc)
    frameskip: int = 4
    full_action_space: bool = False
    fire_reset: bool = True  # ale-py's reset presses FIRE before the no-ops (module doc)
    episode_cap: int | None = 5000  # agent steps; None: ale-py's 108,000 frames
    fire_on_life_loss: bool = False  # FIRE on the step after a lost life (module doc)
    fire_on_frozen_screen: int = 0  # FIRE after this many steps of an unchanged frame; 0: off
    ram: bool = False  # keep each env's RAM, the behaviour characterisation (``atari_ram``)

    def __post_init__(self):
        check_game(self.game)
        check_range("sticky_actions", self.sticky_actions, 0 <= self.sticky_actions < 1,
                    "in [0, 1)")
        check_range("noop_max", self.noop_max, self.noop_max >= 0, ">= 0")
        check_range("frameskip", self.frameskip, self.frameskip >= 1, ">= 1")
        check_range("episode_cap", self.episode_cap,
                    self.episode_cap is None or self.episode_cap >= 1, "None or >= 1")
        check_range("fire_on_frozen_screen", self.fire_on_frozen_screen,
                    self.fire_on_frozen_screen >= 0, ">= 0 (0: off)")


OBS_SHAPE = (4, 84, 84)  # uint8: a stack of the last 4 grayscale 84x84 frames
FROZEN_SCREEN_STEPS = 30  # the quick default of fire_on_frozen_screen (module doc)


@functools.cache
def actions(game: str, full_action_space: bool = False) -> tuple:
    """The ``ale_py.Action``s the network chooses from, in its output order: the game's
    minimal action set (what ``AtariVectorEnv`` uses), or all 18. Read from the ROM, with no
    emulator stepping."""
    ale = _ale()
    if full_action_space:
        return tuple(ale.Action)
    ale.ALEInterface.setLoggerMode(ale.LoggerMode.Error)  # as gymnasium's AtariEnv does
    interface = ale.ALEInterface()
    interface.loadROM(ale.roms.get_rom_path(check_game(game)))
    return tuple(interface.getMinimalActionSet())


def action_count(game: str, full_action_space: bool = False) -> int:
    """How many outputs the network has (``actions``)."""
    return len(actions(game, full_action_space))


def fire_action(game: str, full_action_space: bool = False) -> int | None:
    """The index of FIRE among the actions the network chooses from, or None where the
    game's action set has no FIRE."""
    chosen = actions(game, full_action_space)
    fire = _ale().Action.FIRE
    return chosen.index(fire) if fire in chosen else None


class AtariPool(PoolBase):
    """``num_envs`` emulators stepped together by ale-py's C++ threads (``envs.base``'s
    protocol). Env ``i``'s trajectory depends only on its seed and its actions (verified
    against a fresh env in the tests)."""

    def __init__(self, config: AtariConfig, num_envs: int, num_threads: int = 0):
        super().__init__(num_envs)
        self.config = config
        # The cap is enforced by the evaluator in agent steps (test episodes: to the env's
        # own limit); ale-py's frame limit is the ALE's 108,000 frames, or beyond a longer
        # cap (no-ops included) so that it never cuts an episode first.
        max_frames = 108_000 if config.episode_cap is None else max(
            108_000, (config.episode_cap + config.noop_max + 10) * config.frameskip)
        self.env = _ale().vector_env.AtariVectorEnv(
            config.game, num_envs, batch_size=0, num_threads=num_threads,
            repeat_action_probability=config.sticky_actions, frameskip=config.frameskip,
            noop_max=config.noop_max, full_action_space=config.full_action_space,
            max_num_frames_per_episode=max_frames, reward_clipping=False,
            episodic_life=False, use_fire_reset=config.fire_reset, maxpool=True, grayscale=True,
            img_height=84, img_width=84, stack_num=4)
        self.replicas = None if not config.ram else RamReplicas(
            _ale(), _ale().roms.get_rom_path(config.game),
            actions(config.game, config.full_action_space), config.sticky_actions,
            config.fire_reset, config.frameskip, max_frames, num_envs)
        # FIRE's action index where a rule presses it, else None: nothing tracked per step
        fire = fire_action(config.game, config.full_action_space)
        self.fire = fire if config.fire_on_life_loss or config.fire_on_frozen_screen else None
        self.track_lives = self.fire is not None and config.fire_on_life_loss
        self.frozen_limit = config.fire_on_frozen_screen if self.fire is not None else 0
        self.lives = np.zeros(num_envs, dtype=np.int64)  # each env's lives after its last step
        self.frozen = np.zeros(num_envs, dtype=np.int64)  # steps its newest frame is unchanged
        self.newest = np.zeros((num_envs, *OBS_SHAPE[1:]), dtype=np.uint8)  # that frame
        self.fire_next = np.zeros(num_envs, dtype=bool)  # a rule presses FIRE next step

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """``[N, 4, 84, 84]`` uint8 frame stacks."""
        if not self._started:  # ale-py's partial resets need a full one first
            full = np.zeros(self.num_envs, dtype=np.int64)
            full[mask] = seeds
            obs, info = self.env.reset(seed=full)
        else:
            obs, info = self.env.reset(seed=seeds, options={"reset_mask": mask})
        if self.replicas is not None:
            self.replicas.reset(np.flatnonzero(mask), seeds, info["episode_frame_number"][mask])
        if self.fire is not None:
            self.lives[mask] = info["lives"][mask]
            self.fire_next[mask] = False
            self.frozen[mask] = 0
            self.newest[mask] = obs[mask, -1]
        return obs

    def _send(self, actions: np.ndarray) -> None:
        if self.fire is not None and self.fire_next.any():
            actions = np.where(self.fire_next, self.fire, actions).astype(actions.dtype)
        self.env.send(actions)
        if self.replicas is not None:  # while ale-py's threads step the same frames
            self.replicas.step(actions)

    def _recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, terminated, truncated, info = self.env.recv()
        done = terminated | truncated
        if self.replicas is not None:
            self.replicas.check(rewards, info["lives"], done)
        if self.fire is not None:
            # An env that ended is reset (and its lives read) before it steps again; until
            # then ale-py's own autoreset step may refill its lives, which nothing reads.
            lost = info["lives"] < self.lives if self.track_lives else False
            self.lives = info["lives"].astype(np.int64)
            frozen = False
            if self.frozen_limit:
                same = (obs[:, -1] == self.newest).all(axis=(1, 2))
                self.frozen = np.where(same, self.frozen + 1, 0)
                self.newest = obs[:, -1].copy()
                frozen = self.frozen >= self.frozen_limit
                self.frozen[frozen] = 0  # the next press after as many unchanged steps again
            self.fire_next = (lost | frozen) & ~done
        return obs, rewards, done

    def behaviour(self, envs: np.ndarray) -> np.ndarray:
        """``[len(envs), 128]``: the RAM of these envs, whose episodes just ended."""
        if self.replicas is None:
            raise StateError("this Atari pool keeps no RAM; make it with env.behaviour=ram")
        return self.replicas.ram(envs)

    def close(self) -> None:
        self.env.close()
