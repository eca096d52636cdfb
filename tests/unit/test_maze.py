"""The Hard Maze (neuroevo.envs.maze) against values worked by hand and a scalar port of
Uber's maze.h written independently of the batched one (one robot, one wall at a time)."""

import math

import numpy as np
import pytest

from neuroevo.envs import maze
from neuroevo.envs.maze import GOAL, START, STEPS, WALLS, MazePool

# -- a scalar port of maze.h, a loop per wall ------------------------------------------


def _intersect(wall, c, d):
    ax, ay, bx, by = wall
    bot = (bx - ax) * (d[1] - c[1]) - (by - ay) * (d[0] - c[0])
    if bot == 0:
        return None
    r = ((ay - c[1]) * (d[0] - c[0]) - (ax - c[0]) * (d[1] - c[1])) / bot
    s = ((ay - c[1]) * (bx - ax) - (ax - c[0]) * (by - ay)) / bot
    if 0 < r < 1 and 0 < s < 1:
        return ax + r * (bx - ax), ay + r * (by - ay)
    return None


def _segment_distance(wall, p):
    ax, ay, bx, by = wall
    u = ((p[0] - ax) * (bx - ax) + (p[1] - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)
    if u < 0 or u > 1:
        return min(math.dist((ax, ay), p), math.dist((bx, by), p))
    return math.dist((ax + u * (bx - ax), ay + u * (by - ay)), p)


def _observe(x, y, h):
    out = [1.0]
    for a in (-90, -45, 0, 45, 90, -180):
        t = math.radians(a + h)
        end = (x + 100 * math.cos(t), y + 100 * math.sin(t))
        best = 100.0
        for wall in WALLS:
            p = _intersect(wall, (x, y), end)
            if p is not None:
                best = min(best, math.dist(p, (x, y)))
        out.append(best / 100)
    bearing = (math.degrees(math.atan2(GOAL[1] - y, GOAL[0] - x)) - h) % 360
    out += [float(lo <= bearing < hi or lo <= bearing + 360 < hi)
            for lo, hi in ((315, 405), (45, 135), (135, 225), (225, 315))]
    return out


def _episode(actions):
    """One robot through ``actions``, as maze.h's interpret_outputs and Update."""
    x, y, h, speed, turn = *START, 0.0, 0.0, 0.0
    observations = [_observe(x, y, h)]
    for a0, a1 in actions:
        o1, o2 = min(max(a0 + 0.5, 0), 1), min(max(a1 + 0.5, 0), 1)
        turn += min(max((o1 - 0.5) * 6 - turn, -0.2), 0.2)
        speed += min(max((o2 - 0.5) * 6 - speed, -0.2), 0.2)
        speed, turn = min(max(speed, -3), 3), min(max(turn, -3), 3)
        vx, vy = math.cos(math.radians(h)) * speed, math.sin(math.radians(h)) * speed
        h += turn
        h = h - 360 if h > 360 else h + 360 if h < 0 else h
        if all(_segment_distance(w, (x + vx, y + vy)) >= 8 for w in WALLS):
            x, y = x + vx, y + vy
        observations.append(_observe(x, y, h))
    return np.array(observations), (x, y)


# -- tests ---------------------------------------------------------------------------------


def test_the_start_observation_matches_hand_computed_rangefinders():
    pool = MazePool(1)
    obs = pool.reset(np.ones(1, bool), np.zeros(1, np.int64))[0]
    # Behind (-180 deg, along -x): wall (4, 49)-(7, 202) crosses y = 184 at x = 4 + 3 * 135 /
    # 153 = 6.647, so 36 - 6.647 = 29.353 away. Left (+90 deg, along +y): wall (7, 202)-
    # (195, 198) is at y = 202 - 4 * 29 / 188 = 201.383 above x = 36, 17.383 away. Along
    # -y (-90 deg) the first wall to cross x = 36 is (4, 49)-(57, 53), at y = 51.5: 132.5
    # away, beyond the range 100, so the reading is 1.
    assert obs[0] == 1.0
    assert obs[6] == pytest.approx(0.29353, abs=1e-5)
    assert obs[5] == pytest.approx(0.17383, abs=1e-5)
    assert obs[1] == 1.0
    # the goal (31, 20) from (36, 184) heading 0: bearing atan2(-164, -5) = 268.25 deg, the
    # [225, 315) slice
    assert obs[7:].tolist() == [0, 0, 0, 1]
    np.testing.assert_allclose(obs, _observe(*START, 0.0), atol=1e-6)


def test_the_start_is_clear_of_walls_and_the_goal_is_far():
    assert maze.wall_distance(np.array([START[0]]), np.array([START[1]])).min() > 8
    assert math.dist(START, GOAL) == pytest.approx(164.08, abs=0.01)
    assert WALLS.shape == (13, 4)


def test_the_radar_turns_with_the_heading():
    x, y = np.array([START[0]]), np.array([START[1]])
    for heading, expected in ((0.0, 3), (90.0, 2), (180.0, 1), (268.0, 0)):
        assert maze.radar(x, y, np.array([heading]))[0].tolist() == np.eye(4)[expected].tolist()


def test_speed_ramps_by_at_most_point_two_a_step():
    pool = MazePool(1)
    pool.reset(np.ones(1, bool), np.zeros(1, np.int64))
    xs = []
    for _ in range(3):
        pool.send(np.array([[0.0, 0.5]]))
        pool.recv()
        xs.append(pool.x[0])
    # speeds 0.2, 0.4, 0.6 along +x from 36
    np.testing.assert_allclose(xs, [36.2, 36.6, 37.2])


def test_batched_episodes_equal_the_scalar_port_and_end_at_400_steps():
    rng = np.random.default_rng(0)
    actions = rng.uniform(-0.7, 0.7, size=(STEPS, 3, 2))  # beyond the bounds: clipped
    actions[:, 0] = [0.05, 0.5]  # a robot that drives into a wall and keeps pushing
    pool = MazePool(3)
    obs = [pool.reset(np.ones(3, bool), np.arange(3))]
    rewards, dones = [], []
    for t in range(STEPS):
        pool.send(actions[t])
        o, r, d = pool.recv()
        obs.append(o)
        rewards.append(r)
        dones.append(d)
    obs, rewards, dones = np.array(obs), np.array(rewards), np.array(dones)
    for env in range(3):
        want, final = _episode(actions[:, env])
        np.testing.assert_allclose(obs[:, env], want, atol=1e-5)
        np.testing.assert_allclose(pool.behaviour(np.array([env]))[0], final, atol=1e-4)
        assert dones[:-1, env].sum() == 0 and dones[-1, env]
        assert rewards[:-1, env].sum() == 0
        assert rewards[-1, env] == pytest.approx(-math.dist(final, GOAL))
    # the robot pushing into a wall never came within the radius of one
    assert maze.wall_distance(pool.x[:1], pool.y[:1]).min() >= 8


def test_an_episode_does_not_depend_on_its_env_or_the_other_envs():
    rng = np.random.default_rng(1)
    actions = rng.uniform(-0.5, 0.5, size=(STEPS, 4, 2))
    finals = []
    for order in (np.arange(4), np.array([3, 1, 0, 2])):
        pool = MazePool(4)
        pool.reset(np.ones(4, bool), np.arange(4))
        for t in range(STEPS):
            pool.send(actions[t][order])
            pool.recv()
        finals.append(pool.behaviour(np.arange(4))[np.argsort(order)])
    np.testing.assert_array_equal(finals[0], finals[1])


def test_an_ended_episode_stands_still_until_its_reset():
    pool = MazePool(2)
    pool.reset(np.ones(2, bool), np.arange(2))
    for _ in range(STEPS):
        pool.send(np.full((2, 2), 0.5))
        pool.recv()
    where = pool.behaviour(np.arange(2))
    pool.send(np.full((2, 2), 0.5))
    _, rewards, done = pool.recv()
    np.testing.assert_array_equal(pool.behaviour(np.arange(2)), where)
    assert not done.any() and not rewards.any()
    obs = pool.reset(np.array([True, False]), np.zeros(1, np.int64))
    np.testing.assert_allclose(obs[0], _observe(*START, 0.0), atol=1e-6)
    assert pool.steps.tolist() == [0, STEPS]
