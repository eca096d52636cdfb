"""Every gymnasium space through the generic pool (issue 36): observations flattened as
``neuroevo.envs.gym`` documents, checked against hand-built one-hots and concatenations of
gymnasium's own envs; actions of every supported kind reach the env in its own format; the
spaces that have no fixed-size vector are refused in one line."""

from collections import OrderedDict

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from neuroevo.envs.gym import GymPool, describe
from neuroevo.errors import ConfigError
from neuroevo.policy.heads import act_tensor, to_actions
from neuroevo.spaces import ActionSpace


def one_hot(i, n):
    out = np.zeros(n, np.float32)
    out[i] = 1
    return out


def pool_episode(env_id, seed, actions):
    pool = GymPool(env_id, 2)
    obs = [pool.reset(np.ones(2, bool), np.array([seed, seed + 1]))[0]]
    for a in actions:
        pool.send(np.stack([a, a]))
        o, _, done = pool.recv()
        obs.append(o[0])
        if done[0]:
            break
    pool.close()
    return obs


def reference_episode(env_id, seed, actions, flat):
    env = gymnasium.make(env_id)
    obs = [flat(env.reset(seed=seed)[0])]
    for a in actions:
        o, _, term, trunc, _ = env.step(a)
        obs.append(flat(o))
        if term or trunc:
            break
    return obs


def test_discrete_observations_are_one_hot():
    actions = np.random.default_rng(0).integers(0, 4, 40)
    got = pool_episode("FrozenLake-v1", 3, actions)
    want = reference_episode("FrozenLake-v1", 3, [int(a) for a in actions],
                             lambda o: one_hot(o, 16))
    assert describe("FrozenLake-v1") == ((16,), ActionSpace(n=4))
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_tuple_observations_are_the_concatenated_parts_in_order():
    actions = [1, 1, 0]
    got = pool_episode("Blackjack-v1", 5, np.array(actions))
    want = reference_episode("Blackjack-v1", 5, actions, lambda o: np.concatenate(
        [one_hot(o[0], 32), one_hot(o[1], 11), one_hot(o[2], 2)]))
    assert describe("Blackjack-v1")[0] == (45,)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


class AllSpaces(gymnasium.Env):
    """A Dict of every flattenable kind (built from a plain dict, so gymnasium sorts its
    keys), a Box with infinite bounds among them; its action space is given by kwargs. It
    records each action it receives."""

    def __init__(self, action_space):
        self.observation_space = spaces.Dict({
            "z": spaces.Discrete(3, start=-1), "b": spaces.Box(-np.inf, np.inf, (2,)),
            "m": spaces.MultiDiscrete([2, 3]), "a": spaces.MultiBinary(2)})
        self.action_space = action_space
        self.received = []
        self.t = 0

    def _obs(self):
        return {"z": self.t % 3 - 1, "b": np.array([self.t, -self.t], np.float32),
                "m": np.array([self.t % 2, self.t % 3]), "a": np.array([1, self.t % 2], np.int8)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.received.append(action)
        self.t += 1
        return self._obs(), 1.0, self.t >= 5, False, {}


ACTION_SPACES = {"Discrete": spaces.Discrete(3, start=5),
                 "MultiDiscrete": spaces.MultiDiscrete([[2, 3], [4, 2]], start=[[1, 0], [0, -2]]),
                 "MultiBinary": spaces.MultiBinary([2, 2]),
                 "Box": spaces.Box(np.array([-1.0, -np.inf]), np.array([np.inf, 2.0]))}
for _name, _space in ACTION_SPACES.items():
    gymnasium.register(f"neuroevo-test/{_name}-v0", entry_point=AllSpaces,
                       kwargs={"action_space": _space}, max_episode_steps=50)


def test_dict_observations_follow_the_sorted_keys():
    obs = pool_episode("neuroevo-test/Discrete-v0", 0, [np.array(0)] * 2)
    # keys a, b, m, z: MultiBinary bits, the Box, MultiDiscrete one-hots, Discrete one-hot
    want = [np.concatenate([[1, t % 2], [t, -t], one_hot(t % 2, 2), one_hot(t % 3, 3),
                            one_hot(t % 3, 3)]).astype(np.float32) for t in range(3)]
    assert all(np.array_equal(g, w) for g, w in zip(obs, want, strict=True))


@pytest.mark.parametrize("name,space,engine,env", [
    ("Discrete", ActionSpace(n=3), np.array(2), 7),
    ("MultiDiscrete", ActionSpace(nvec=(2, 3, 4, 2)), np.array([1, 2, 3, 0]),
     np.array([[2, 2], [3, -2]])),
    ("MultiBinary", ActionSpace(nvec=(2, 2, 2, 2)), np.array([1, 0, 0, 1]),
     np.array([[1, 0], [0, 1]])),
    ("Box", ActionSpace(low=(-1.0, -np.inf), high=(np.inf, 2.0)), np.array([0.5, -7.0]),
     np.array([0.5, -7.0]))])
def test_each_action_space_reaches_the_env_in_its_own_format(name, space, engine, env):
    env_id = f"neuroevo-test/{name}-v0"
    assert describe(env_id)[1] == space
    pool = GymPool(env_id, 1)
    pool.reset(np.ones(1, bool), np.array([0]))
    pool.send(engine[None].astype(space.dtype))
    pool.recv()
    got = pool.envs[0].unwrapped.received[0]
    assert np.array_equal(np.asarray(got), env) and np.asarray(got).dtype == (
        np.asarray(ACTION_SPACES[name].sample()).dtype)


def test_a_multi_discrete_head_is_an_argmax_per_choice():
    space = ActionSpace(nvec=(2, 3, 1))
    out = torch.randn(5, 6, generator=torch.Generator().manual_seed(0))
    naive = [[int(row[:2].argmax()), int(row[2:5].argmax()), 0] for row in out]
    assert to_actions(out, space).tolist() == naive
    assert act_tensor(out, space).tolist() == naive
    assert space.sample(np.random.default_rng(0), 4).shape == (4, 3)


@pytest.mark.parametrize("name", ["MultiDiscrete", "Box"])
def test_a_run_trains_and_its_policy_loads(tmp_path, monkeypatch, name):
    import json

    from neuroevo import cli
    from neuroevo.policy.export import load_policy

    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "ga", "--env", f"neuroevo-test/{name}-v0", "--population", "4",
                     "--generations", "1", "--device", "cpu", "--set", "net.hidden=8",
                     "--set", "algo.elite_candidates=1", "--set", "algo.validation_episodes=1",
                     "--set", "algo.test_episodes=1", "--no-progress", "--run-dir", "r"]) == 0
    row = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[0])
    assert row["fitness_max"] == 5.0  # every episode is 5 steps of reward 1
    policy = load_policy(str(tmp_path / "r" / "policy.safetensors"))
    assert policy.act(torch.zeros(3, 12)).shape == ((3, 4) if name == "MultiDiscrete"
                                                    else (3, 2))


class Odd(AllSpaces):
    def __init__(self, observation_space, action_space):
        super().__init__(action_space)
        self.observation_space = observation_space


ODD = {"Text": (spaces.Text(5), spaces.Discrete(2), "observes a Text space"),
       "Graph": (spaces.Graph(spaces.Box(0, 1, (2,)), None), spaces.Discrete(2),
                 "observes a Graph space"),
       "Sequence": (spaces.Tuple([spaces.Sequence(spaces.Discrete(2))]), spaces.Discrete(2),
                    "observes a Sequence space"),
       "TupleAction": (spaces.Discrete(2), spaces.Tuple([spaces.Discrete(2)] * 2),
                       "has a Tuple action space")}
for _name, (_obs, _act, _) in ODD.items():
    gymnasium.register(f"neuroevo-test/{_name}-v0", entry_point=Odd,
                       kwargs={"observation_space": _obs, "action_space": _act})


@pytest.mark.parametrize("name", list(ODD))
def test_spaces_without_a_vector_are_one_line(name):
    with pytest.raises(ConfigError, match=ODD[name][2]) as e:
        describe(f"neuroevo-test/{name}-v0")
    assert "\n" not in str(e.value)


def test_dict_keys_keep_an_ordered_dicts_order():
    space = spaces.Dict(OrderedDict([("z", spaces.Discrete(2)), ("a", spaces.Discrete(3))]))
    assert list(space.keys()) == ["z", "a"]  # what the module doc promises gymnasium does
    assert spaces.flatten(space, OrderedDict([("z", 1), ("a", 0)])).tolist() == [0, 1, 1, 0, 0]
