import numpy as np

from neuroevo.engine.obsstats import sampled
from neuroevo.engine.slots import IDLE, Slots, episode_seed, step_normals


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
    assert s.row_of[4] == s.count - 1  # env 4 now holds the last row
    assert s.stop(4) is None  # stopping the last row moves no network
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


def test_step_normals_are_standard_normal_and_keyed_by_seed_and_step():
    z = step_normals(np.arange(20000), np.full(20000, 3), 4)  # [N, 4]
    assert z.shape == (20000, 4)
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    assert abs((z**4).mean() - 3) < 0.15  # the normal's kurtosis
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 0.03  # components independent
    alone = step_normals(np.array([5]), np.array([7]), 4)[0]
    batched = step_normals(np.array([1, 5, 5]), np.array([7, 7, 8]), 4)
    assert np.array_equal(alone, batched[1])  # a function of (seed, step) only
    assert not np.array_equal(batched[0], batched[1]) and not np.array_equal(batched[1],
                                                                             batched[2])


def test_sampled_takes_the_asked_fraction_of_seeds():
    seeds = range(50000)
    assert abs(sum(sampled(s, 0.01) for s in seeds) / 50000 - 0.01) < 0.002
    assert not any(sampled(s, 0.0) for s in range(1000))
    assert all(sampled(s, 1.0) for s in range(1000))
