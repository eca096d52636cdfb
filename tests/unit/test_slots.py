import numpy as np

from neuroevo.engine.slots import IDLE, Slots, episode_seed


def check_invariants(s: Slots):
    active = np.flatnonzero(s.active)
    assert s.count == len(active)
    assert sorted(s.env_of[: s.count]) == sorted(active)  # rows [0, count) = running envs
    assert all(s.env_of[s.row_of[e]] == e for e in range(len(s.member)))


def test_rows_stay_a_prefix_as_episodes_start_and_stop():
    s, rows = Slots(5), {}  # rows: which member's network each row holds, as SlotParams would
    for env, member in [(3, 0), (0, 1), (4, 2)]:
        rows[s.start(env, member)] = member
        check_invariants(s)
    assert s.count == 3
    move = s.stop(0)  # env 0 (row 1) falls idle: the last row moves into its place
    assert move == (2, 1)
    rows[move[1]] = rows.pop(move[0])
    check_invariants(s)
    assert s.stop(4) is None or True
    check_invariants(s)
    for row in range(s.count):  # each running env's row holds its own member's network
        assert rows[row] == s.member[s.env_of[row]]
    assert s.member[0] == IDLE and s.start(3, 7) == s.row_of[3]  # restart in place


def test_step_accumulates_returns_and_ends_at_done_or_cap():
    s = Slots(3)
    s.start(0, 0), s.start(2, 1)
    ended = s.step(np.array([1.0, 5.0, 2.0]), np.array([False, True, False]), cap=2)
    assert ended.tolist() == [] and s.ret.tolist() == [1.0, 0.0, 2.0]  # env 1 is idle
    ended = s.step(np.array([1.0, 1.0, 1.0]), np.array([True, False, False]), cap=2)
    assert ended.tolist() == [0, 2] and s.steps.tolist() == [2, 0, 2]


def test_episode_seeds_name_the_evaluation():
    seeds = {episode_seed(0, g, p, i) for g in range(3) for p in ("train", "validate")
             for i in range(50)}
    assert len(seeds) == 300 and all(0 <= x < 2**31 for x in seeds)
    assert episode_seed(1, 0, "train", 0) != episode_seed(0, 0, "train", 0)
