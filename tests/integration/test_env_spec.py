"""``env_spec`` says what a pool will be without opening one: checked against the real envs."""

import gymnasium
import numpy as np
import pytest

from neuroevo.config import EnvConfig
from neuroevo.envs.atari import AtariPool
from neuroevo.envs.locomotion import TASKS
from neuroevo.envs.spec import env_spec
from neuroevo.errors import UnknownName


@pytest.mark.parametrize("game", ["pong", "breakout", "space_invaders", "ms_pacman"])
def test_atari_spec_matches_ale_py_s_vector_env(game):
    spec = env_spec(EnvConfig(game=game, episode_cap=100, frameskip=3))
    pool = AtariPool(spec.atari, 1, num_threads=1)
    try:
        obs = pool.reset(np.ones(1, bool), [0])
        assert spec.action.n == pool.env.single_action_space.n
        assert spec.obs_shape == obs.shape[1:] == pool.env.single_observation_space.shape
    finally:
        pool.close()
    assert (spec.kind, spec.frameskip, spec.episode_cap, spec.atari.frameskip) == (
        "atari", 3, 100, 3)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
def test_gym_spec_matches_gymnasium(env_id):
    spec, env = env_spec(EnvConfig(id=env_id)), gymnasium.make(env_id)
    assert spec.kind == "gym" and spec.obs_shape == env.observation_space.shape
    assert spec.max_steps == env.spec.max_episode_steps
    if isinstance(env.action_space, gymnasium.spaces.Discrete):
        assert spec.action.n == env.action_space.n
    else:
        low, high = spec.action.bounds()
        assert np.array_equal(low, env.action_space.low)
        assert np.array_equal(high, env.action_space.high)
    pool = spec.make_pool(2)
    assert pool.reset(np.ones(2, bool), [1, 2]).shape == (2, *spec.obs_shape)
    pool.close()


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_mujoco_spec_matches_gymnasium(env_id):
    """(HumanoidTrap-v0: Humanoid-v5's, whose model it changes by three walls.)"""
    spec, env = env_spec(EnvConfig(id=env_id)), gymnasium.make(TASKS[env_id].base or env_id)
    assert spec.kind == "mujoco" and spec.obs_shape == env.observation_space.shape
    low, high = spec.action.bounds()
    assert np.array_equal(low, env.action_space.low)
    assert np.array_equal(high, env.action_space.high)
    assert spec.max_steps == 1000 and spec.frameskip == 1
    env.close()


def test_unknown_names_are_one_line_errors():
    with pytest.raises(UnknownName, match="unknown Atari game 'pongg'"):
        env_spec(EnvConfig(game="pongg"))
    with pytest.raises(UnknownName, match="unknown gymnasium env id 'CartPol-v1'"):
        env_spec(EnvConfig(id="CartPol-v1"))
