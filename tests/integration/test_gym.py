"""Any gymnasium env through the generic pool: against gymnasium's own env, and end to end."""

import gymnasium
import numpy as np
import pytest

from neuroevo import train
from neuroevo.envs.gym import GymPool, check_env_id
from neuroevo.errors import StateError, UnknownName


def test_pool_episodes_equal_gymnasium_env_with_the_same_seed():
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, 60)
    ref = gymnasium.make("CartPole-v1")
    obs, _ = ref.reset(seed=11)
    expected = [obs]
    for a in actions:
        obs, _, term, trunc, _ = ref.step(int(a))
        expected.append(obs)
        if term or trunc:
            break
    pool = GymPool("CartPole-v1", 3)
    pool.reset(np.ones(3, bool), [1, 2, 3])
    for _ in range(5):  # some history in env 1 first
        pool.send(np.zeros(3, dtype=np.int32))
        pool.recv()
    got = [pool.reset(np.array([False, True, False]), [11])[1]]
    for a in actions[: len(expected) - 1]:
        pool.send(np.array([0, a, 1], dtype=np.int32))
        got.append(pool.recv()[0][1])
    assert all(np.array_equal(x, y) for x, y in zip(got, expected, strict=True))


def test_protocol_errors_and_unknown_ids():
    with pytest.raises(UnknownName, match=r"unknown gymnasium env id 'CartPol-v1'; did you mean 'CartPole-v1'"):
        check_env_id("CartPol-v1")
    pool = GymPool("CartPole-v1", 1)
    with pytest.raises(StateError, match=r"recv\(\) without send\(\)"):
        pool.recv()


@pytest.mark.slow
def test_es_solves_cartpole_and_continuous_actions_are_clipped():
    rows = train(algo__name="es", env__id="CartPole-v1", algo__population=50, seed=0,
                 budget__generations=12, engine__device="cpu").history
    assert rows[0]["fitness_mean"] < 200 and max(r["fitness_mean"] for r in rows) > 450
    pendulum = train(algo__name="es", env__id="Pendulum-v1", algo__population=4,
                     budget__generations=1, engine__device="cpu", net__hidden="8")
    assert pendulum.history[0]["frames"] == 4 * 200  # gymnasium's time limit ends each episode
