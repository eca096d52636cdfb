"""Atari start states: the pool's resets against frame-by-frame references (issue 12, item 6).

The Deep GA paper (and Uber's code) starts an episode with 1-30 no-op frames, then FIRE.
ale-py's vector env, which the pool drives, presses FIRE first and then plays
``max(0, U(0, noop_max - 1) - 1)`` no-op frames (``U(0, noop_max - 1)`` in games without FIRE),
inside its C++ reset. The pool cannot replay the paper's order: single frames exist only
inside that reset, and ``send`` steps every env of the vector by whole agent steps. These
tests pin ale-py's order, so that what ``neuroevo.envs.atari`` documents stays true, and show
that the order matters.
"""

import functools

import ale_py
import ale_py.roms
import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv

from neuroevo.envs.atari import AtariConfig, AtariPool

PROTOCOL = dict(batch_size=0, num_threads=1, repeat_action_probability=0.0,
                reward_clipping=False, episodic_life=False, maxpool=True, grayscale=True,
                img_height=84, img_width=84, stack_num=4)


@functools.cache
def frame_env(game: str) -> AtariVectorEnv:
    """One env stepped frame by frame whose reset plays neither no-ops nor FIRE."""
    return AtariVectorEnv(game, 1, frameskip=1, noop_max=0, use_fire_reset=False, **PROTOCOL)


def screens(game: str, first: list[int], noops: int) -> list[bytes]:
    """The newest frame after a fresh reset and ``first`` actions, then after each of
    ``noops`` no-op frames: ``noops + 1`` screens, frame by frame."""
    env = frame_env(game)
    obs, _ = env.reset(seed=np.array([0]))  # a seeded reset reloads the ROM: a fresh game
    for action in first:
        obs, *_ = env.step(np.array([action]))
    out = [obs[0, -1].tobytes()]
    for _ in range(noops):
        obs, *_ = env.step(np.array([0]))
        out.append(obs[0, -1].tobytes())
    return out


def raw_screens(game: str, fire: int | None, before: bool, runs: range) -> set[bytes]:
    """Raw grayscale screens after ``n`` no-op frames and FIRE, FIRE before them when
    ``before``, for each ``n`` in ``runs``: the emulator itself, branched by cloneState."""
    ale = ale_py.ALEInterface()
    ale.setInt("random_seed", 0)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    ale.reset_game()
    if before:
        ale.act(fire)
    out = set()
    for n in range(max(runs) + 1):
        if n in runs:
            if before:
                out.add(ale.getScreenGrayscale().tobytes())
            else:
                state = ale.cloneState()
                ale.act(fire)
                out.add(ale.getScreenGrayscale().tobytes())
                ale.restoreState(state)
        ale.act(ale_py.Action.NOOP)
    return out


def fire_index(game: str) -> int | None:
    actions = list(frame_env(game).ale.get_action_set())
    return actions.index(ale_py.Action.FIRE) if ale_py.Action.FIRE in actions else None


def pool_starts(game: str, seeds) -> list[np.ndarray]:
    """The pool's reset observations for ``seeds``, four envs reset together at a time."""
    pool, out = AtariPool(AtariConfig(game), 4, num_threads=2), []
    for k in range(0, len(seeds), 4):
        out += list(pool.reset(np.ones(4, bool), np.asarray(seeds[k:k + 4])))
    pool.close()
    return out


def test_breakout_starts_are_fire_then_0_to_28_noop_frames():
    fire = fire_index("breakout")
    # FIRE then j no-op frames, j = 0..28; breakout's 29 screens are distinct, so each start
    # names its j
    reference = {s: j for j, s in enumerate(screens("breakout", [fire], 28))}
    assert len(reference) == 29
    starts = pool_starts("breakout", list(range(1000, 1080)))
    js = []
    for obs in starts:
        assert not obs[:3].any()  # a fresh stack: only the newest frame is drawn
        js.append(reference[obs[-1].tobytes()])  # KeyError: a start outside the set
    assert len(set(js)) >= 20  # seeded per episode, spread over the range


def test_the_papers_start_states_are_not_ale_pys():
    """1-30 no-op frames then FIRE (the paper) reaches breakout screens that ale-py's resets
    never show: the two protocols start from different states."""
    ale_py_starts = raw_screens("breakout", ale_py.Action.FIRE, True, range(29))
    paper_starts = raw_screens("breakout", ale_py.Action.FIRE, False, range(1, 31))
    assert len(ale_py_starts) == 29
    assert paper_starts - ale_py_starts
    assert len(paper_starts) < len(ale_py_starts)  # the paper's order: fewer distinct screens


@pytest.mark.parametrize("game", ["freeway"])
def test_games_without_fire_start_after_0_to_29_noop_frames(game):
    assert fire_index(game) is None
    run = screens(game, [], 39)
    reference = set(run[:30])
    outside = set(run[30:]) - reference
    assert outside  # longer no-op runs draw other screens: the check below can fail
    assert all(obs[-1].tobytes() in reference for obs in pool_starts(game, list(range(40))))
