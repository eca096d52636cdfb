"""ale-py's gymnasium ids on the Atari engine (issue 36): the settings each id means, in
config.yaml; the pool frame for frame against ``gymnasium.make`` of the same id under
gymnasium's own Atari preprocessing with sticky actions off, and in distribution with them
on; conflicting settings and random-frameskip ids refused in one line."""

import dataclasses

import ale_py
import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing

from neuroevo.build import resolve
from neuroevo.config import Config, override
from neuroevo.envs.atari import AtariPool
from neuroevo.envs.spec import env_spec
from neuroevo.errors import ConfigError

gymnasium.register_envs(ale_py)


def config(env_id, **sets):
    cfg = Config()
    override(cfg, "env.id", env_id)
    for key, value in sets.items():
        override(cfg, f"env.{key}", value)
    return cfg


@pytest.mark.parametrize("env_id,game,sticky,skip", [
    ("ALE/Breakout-v5", "breakout", 0.25, 4), ("ALE/MsPacman-v5", "ms_pacman", 0.25, 4),
    ("PongNoFrameskip-v4", "pong", 0.0, 1), ("PongNoFrameskip-v0", "pong", 0.25, 1)])
def test_an_id_means_its_settings_and_config_yaml_says_them(env_id, game, sticky, skip):
    env = resolve(config(env_id)).env
    assert (env.game, env.sticky_actions, env.frameskip, env.full_action_space,
            env.noop_max, env.fire_reset) == (game, sticky, skip, False, 0, False)
    assert resolve(resolve(config(env_id))) == resolve(config(env_id))
    spec = env_spec(env)
    assert spec.kind == "atari" and spec.atari.sticky_actions == sticky
    assert spec.action.n == gymnasium.make(env_id).action_space.n


def test_conflicting_settings_and_random_frameskip_ids_are_one_line():
    with pytest.raises(ConfigError, match=r"env.noop_max=5 conflicts with env.id="
                                          r"'ALE/Breakout-v5', which means 0"):
        resolve(config("ALE/Breakout-v5", noop_max=5))
    with pytest.raises(ConfigError, match=r"env.sticky_actions=0.1 conflicts"):
        resolve(config("ALE/Breakout-v5", sticky_actions=0.1))
    with pytest.raises(ConfigError, match=r"Breakout-v4 skips a random 2 to 4 frames per step"
                                          r".*use ALE/Breakout-v5, BreakoutNoFrameskip-v4 or "
                                          r"--game breakout"):
        resolve(config("Breakout-v4"))
    # the id's own values, or the fire rules it does not set, are fine
    assert resolve(config("ALE/Breakout-v5", sticky_actions=0.25, fire_on_life_loss=False))


def reference(env_id):
    """``gymnasium.make`` of the id, stepped frame by frame under gymnasium's
    AtariPreprocessing: the max over the last 2 of 4 frames, grayscale 84x84."""
    return AtariPreprocessing(gymnasium.make(env_id, frameskip=1), noop_max=0, frame_skip=4,
                              terminal_on_life_loss=False)


def pool_for(env_id, sticky, num_envs):
    cfg = config(env_id, fire_on_life_loss=False, fire_on_frozen_screen=0)
    atari = dataclasses.replace(env_spec(cfg.env).atari, sticky_actions=sticky)
    return AtariPool(atari, num_envs, 1)


def test_the_pool_equals_gymnasium_make_frame_for_frame_without_sticky_actions():
    env_id, seed = "ALE/Breakout-v5", 7
    actions = np.random.default_rng(0).integers(0, 4, 400)
    pool = pool_for(env_id, 0.0, 2)
    ref = gymnasium.wrappers.FrameStackObservation(
        AtariPreprocessing(gymnasium.make(env_id, frameskip=1, repeat_action_probability=0.0),
                           noop_max=0, frame_skip=4, terminal_on_life_loss=False), 4)
    obs = pool.reset(np.ones(2, bool), np.array([seed, seed + 1]))
    want, _ = ref.reset(seed=seed)
    assert np.array_equal(obs[0, -1], want[-1])
    steps = 0
    for t, a in enumerate(actions):
        pool.send(np.array([a, a], np.int32))
        obs, reward, done = pool.recv()
        want, want_reward, term, trunc, _ = ref.step(int(a))
        assert np.array_equal(obs[0, -1], want[-1]), t
        if t >= 3:  # the whole stack, once it holds no reset frame
            assert np.array_equal(obs[0], want), t
        assert (reward[0], done[0]) == (want_reward, term or trunc), t
        steps += 1
        if done[0]:
            break
    assert steps > 100 and done[0]  # a whole episode: lives lost to the end
    pool.close()


@pytest.mark.slow
def test_sticky_actions_match_gymnasium_make_in_distribution():
    """The paddle's column after 40 steps of RIGHT x4, LEFT x4, over 64 seeds each: the v5
    id's sticky actions (0.25) spread it as gymnasium.make's do; without them it is fixed."""
    env_id, n = "ALE/Breakout-v5", 64
    actions = np.array(([2] * 4 + [3] * 4) * 5)

    def paddle(frame):  # the centroid of the lit columns of the paddle's rows
        lit = (frame[74:80] > 0).sum(0)
        return (lit * np.arange(84)).sum() / max(lit.sum(), 1)

    def pool_columns(sticky):
        pool = pool_for(env_id, sticky, n)
        obs = pool.reset(np.ones(n, bool), np.arange(n) + 100)
        for a in actions:
            pool.send(np.full(n, a, np.int32))
            obs, *_ = pool.recv()
        pool.close()
        return np.array([paddle(o[-1]) for o in obs])

    env, ref = reference(env_id), []
    env.reset(seed=1000)  # seeded once: a seeded reset reloads the ROM, an unseeded one not
    for _ in range(n):
        o, _ = env.reset()
        for a in actions:
            o, *_ = env.step(int(a))
        ref.append(paddle(o))
    ours, ref = pool_columns(0.25), np.array(ref)
    z = (ours.mean() - ref.mean()) / np.sqrt(ours.var() / n + ref.var() / n)
    assert abs(z) < 3 and 0.6 < ours.std() / ref.std() < 1.6, (ours.mean(), ref.mean(),
                                                                ours.std(), ref.std())
    assert len(set(pool_columns(0.0))) == 1
