"""The Atari RAM of every env of an ``AtariPool``: the built-in behaviour characterisation
(BC) of Atari games for novelty search (``env.behaviour=ram``).

Conti et al. 2018 (arXiv 1712.06560) characterise an Atari policy by the emulator's RAM:
the authors' ``ESAtariPolicy.rollout`` (``es_distributed/policies.py``) records the 128
bytes after every step, and ``nses.py``'s ``euclidean_distance`` compares two such
sequences, the shorter padded with its last state. **We keep the last state only**, the
RAM when the episode ends (128 values in 0-255, as float32): a BC of one size for every
episode, so that the archive is a ``[n, 128]`` tensor and novelty one batched ``cdist``.
Episodes that end in the same state are at distance 0 here, whatever their paths; the
authors' distance also counts the steps before.

ale-py 0.12's vector env gives no RAM, so the pool keeps a replica of each env: an
``ale_py.ALEInterface`` of the same game, given the calls that the vector env's C++ env
makes (``src/ale/vector/preprocessed_env.cpp``, 0.12.1). A seeded reset there sets
``random_seed``, reloads the ROM, resets the game, presses FIRE where ``fire_reset`` and
the action set have it, and plays no-op frames (their count drawn from an RNG of its own).
The replica loads the ROM once: a ROM load makes the same emulator every time (the
console's own RNG has a fixed seed, ``system_random_seed``) except for the environment RNG
that ``random_seed`` seeds, a ``std::mt19937`` that draws sticky actions. So a reset
restores the state saved after that one load with the RNG's saved text (``Random.cxx``:
the engine's ``operator<<``) replaced by the text of an ``mt19937`` seeded with the
episode's seed, which numpy's ``RandomState`` seeds alike. It then resets the game and
plays FIRE and no-ops up to the vector env's ``episode_frame_number``. Each step plays the
step's action for ``frameskip`` frames, stopping where the vector env stops (game over, its
frame limit). With the same calls and the same RNG the emulators are the same, sticky
actions included. Every step checks the replica's reward and lives against the vector
env's, and a replica that ever differs stops the run with an error rather than measure a
wrong BC.

Cost: every frame is emulated twice, the replica's in the driver's thread (ale-py's
``ALEInterface`` holds the GIL), and a reset's 60 frames of ``reset_game`` and its no-ops;
a ROM load per episode, as the vector env pays in its own threads, would cost 86 ms more
on our 2-core CPU.
"""

from __future__ import annotations

import numpy as np

from neuroevo.errors import StateError

RAM_SIZE = 128


class RamReplicas:
    """One ``ALEInterface`` per env of a pool, stepped with the vector env's calls."""

    def __init__(self, ale, rom: str, actions: tuple, sticky_actions: float,
                 fire_reset: bool, frameskip: int, max_frames: int, num_envs: int):
        self.ale, self.actions = ale, actions
        self.fire = fire_reset and ale.Action.FIRE in actions
        self.frameskip, self.max_frames = frameskip, max_frames
        self.envs = []
        for _ in range(num_envs):
            env = ale.ALEInterface()
            env.setFloat("repeat_action_probability", sticky_actions)
            env.setInt("random_seed", 0)
            env.loadROM(rom)
            self.envs.append(env)
        self.loaded = _Loaded(self.envs[0].cloneState(include_rng=True).serialize(), 0)
        self.live = np.zeros(num_envs, dtype=bool)  # reset and not ended since
        self.frames = np.zeros(num_envs, dtype=np.int64)  # frames played since the reset
        self.rewards = np.zeros(num_envs, dtype=np.float64)  # of the step sent last
        self.lives = np.zeros(num_envs, dtype=np.int64)

    def reset(self, envs: np.ndarray, seeds: np.ndarray, episode_frames: np.ndarray) -> None:
        """Restart ``envs`` as the vector env's seeded reset did, to its frame count."""
        noop = self.ale.Action.NOOP
        for i, seed, frames in zip(envs.tolist(), seeds.tolist(), episode_frames.tolist(),
                                   strict=True):
            env = self.envs[i]
            env.restoreState(self.ale.ALEState(self.loaded.seeded(seed)))
            env.reset_game()  # some ROMs' own start actions count as episode frames
            noops = frames - env.getEpisodeFrameNumber() - self.fire
            if self.fire:
                env.act(self.ale.Action.FIRE)
            for _ in range(noops):
                env.act(noop)
            if env.getEpisodeFrameNumber() != frames:  # a game over within the no-ops
                raise StateError(f"the RAM replica of env {i} (seed {seed}) cannot replay "
                                 "ale-py's reset; use another env.behaviour or report it")
            self.live[i], self.frames[i] = True, 0
            self.lives[i] = env.lives()

    def step(self, actions: np.ndarray) -> None:
        """Play each live env's action for the step's frames (the vector env's loop)."""
        for i in np.flatnonzero(self.live).tolist():
            env, action, reward = self.envs[i], self.actions[int(actions[i])], 0
            for _ in range(self.frameskip):
                reward += env.act(action)
                self.frames[i] += 1
                if env.game_over() or self.frames[i] >= self.max_frames:
                    break
            self.rewards[i] = reward
            self.lives[i] = env.lives()

    def check(self, rewards: np.ndarray, lives: np.ndarray, done: np.ndarray) -> None:
        """Stop where a replica's step differs from the vector env's; an env that ended
        is not stepped again until its reset."""
        live = np.flatnonzero(self.live)
        bad = live[(self.rewards[live] != rewards[live]) | (self.lives[live] != lives[live])]
        if len(bad):
            i = int(bad[0])
            raise StateError(f"the RAM replica of env {i} lost step with ale-py's vector env "
                             f"(reward {self.rewards[i]} against {rewards[i]}, lives "
                             f"{self.lives[i]} against {lives[i]}); use another "
                             "env.behaviour or report it")
        self.live &= ~done

    def ram(self, envs: np.ndarray) -> np.ndarray:
        """``[len(envs), 128]`` float32: each env's RAM now."""
        out = np.empty((len(envs), RAM_SIZE), dtype=np.uint8)
        for row, i in enumerate(envs.tolist()):
            self.envs[i].getRAM(out[row])
        return out.astype(np.float32)


def _rng_text(seed: int) -> bytes:
    """The environment RNG as ALE serialises it after ``seed``: a ``Serializer`` string (its
    length as 4 little-endian bytes) of ``std::mt19937``'s 624 words and its index."""
    words = np.random.RandomState(seed & 0xFFFF_FFFF).get_state()[1]
    return _string(" ".join(map(str, words.tolist())).encode() + b" 624")


def _string(text: bytes) -> bytes:
    return len(text).to_bytes(4, "little") + text


class _Loaded:
    """A state serialised after a ROM load (``ALEState::serialize``: six ints, then the
    emulator's own state as a string, then two ints), with its RNG for any seed."""

    def __init__(self, state: bytes, seed: int):
        size = int.from_bytes(state[24:28], "little")
        inner, self.tail = state[28:28 + size], state[28 + size:]
        rng = _rng_text(seed)
        at = inner.find(rng)
        if at < 0 or at + len(rng) != len(inner):
            raise StateError("this ale-py saves its state in a form the RAM replicas do not "
                             "know; use ale-py 0.12 or another env.behaviour")
        self.head, self.before = state[:24], inner[:at]

    def seeded(self, seed: int) -> bytes:
        return self.head + _string(self.before + _rng_text(seed)) + self.tail
