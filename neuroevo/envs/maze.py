"""The Hard Maze of Lehman & Stanley (2011), batched: a deceptive navigation task.

A point robot (radius 8) starts at (36, 184) facing +x and must reach the goal at (31, 20).
The straight line to the goal ends in a cul-de-sac, so a policy rewarded for getting close
is trapped there: the task on which novelty search beats reward-only search (Lehman &
Stanley 2011, "Abandoning Objectives", Evolutionary Computation 19(2); Such et al. 2017,
section 4.3, runs GA-NS on it).

Geometry, sensors and dynamics follow Uber's port (``uber-research/deep-neuroevolution``,
``gpu_implementation/gym_tensorflow/maze/maze.h`` and ``hard_maze.txt``), which is Lehman's
later ``mazerobot`` code:

- 13 wall segments (``WALLS``); the robot collides when its centre comes within 8 of a
  wall, and then does not move that step (its speeds are kept, its heading still turns).
- 11 observations: a bias 1; six rangefinders at -90, -45, 0, 45, 90 and -180 degrees from
  the heading, each the distance to the nearest wall along the ray over its range 100; four
  goal "radar" pie slices, [315, 45), [45, 135), [135, 225) and [225, 315) degrees from the
  heading, 1 for the slice holding the goal (walls do not block it) and 0 for the others.
- 2 actions in [-0.5, 0.5] (a linear output is clipped there, as Uber's ``action + 0.5``
  clipped to [0, 1]): targets of angular velocity and speed, ``6 * a``; each moves toward
  its target by at most 0.2 a step, and both stay within +/- 3 (degrees or units a step).
- One step: the velocity from the old heading; the heading turns (wrapped once into
  [0, 360]); the move is taken unless it collides; the sensors update.
- 400 steps an episode; the return is the negative distance to the goal after the last
  step (0 before), and the behaviour characterisation is the final (x, y).

Where this differs from Uber's port: arithmetic is float64 (the C++ uses float32), and the
angle of pi is numpy's (the C++ uses 3.1415926). Neither changes the task. Lehman's 2011
release differs more (acceleration control, a sigmoid network, a success freeze within 5 of
the goal); we follow Uber's, the version the Deep GA paper's GA-NS ran on. ``SOLVED_RADIUS``
(10, ``maze.h``'s ``reachgoal``) says which final positions count as reaching the goal in
reports; it does not end an episode.
"""

from __future__ import annotations

import numpy as np

from neuroevo.envs.base import PoolBase
from neuroevo.spaces import ActionSpace

ENV_ID = "HardMaze-v0"
WALLS = np.array([[41, 5, 3, 8], [3, 8, 4, 49], [4, 49, 57, 53], [4, 49, 7, 202],
                  [7, 202, 195, 198], [195, 198, 186, 8], [186, 8, 39, 5],
                  [56, 54, 56, 157], [57, 106, 158, 162], [77, 201, 108, 164],
                  [6, 80, 33, 121], [192, 146, 87, 91], [56, 55, 133, 30]], dtype=np.float64)
START, GOAL, START_HEADING = (36.0, 184.0), (31.0, 20.0), 0.0
RADIUS, RANGE, STEPS = 8.0, 100.0, 400
RANGEFINDERS = np.array([-90.0, -45.0, 0.0, 45.0, 90.0, -180.0])
SLICES = ((315.0, 405.0), (45.0, 135.0), (135.0, 225.0), (225.0, 315.0))
MAX_SPEED, MAX_CHANGE, GAIN = 3.0, 0.2, 6.0
SOLVED_RADIUS = 10.0
OBS_SIZE = 1 + len(RANGEFINDERS) + len(SLICES)
ACTION = ActionSpace.box_of(np.full(2, -0.5), np.full(2, 0.5))


def wall_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[N, walls]`` distance from each point to each wall segment (``maze.h``'s
    ``Line::distance``: to the nearest end where the projection falls outside)."""
    ax, ay, bx, by = (WALLS[:, k] for k in range(4))
    dx, dy = bx - ax, by - ay
    u = ((x[:, None] - ax) * dx + (y[:, None] - ay) * dy) / (dx * dx + dy * dy)
    inside = (u >= 0) & (u <= 1)
    px, py = ax + u * dx, ay + u * dy
    to_line = np.hypot(px - x[:, None], py - y[:, None])
    ends = np.minimum(np.hypot(ax - x[:, None], ay - y[:, None]),
                      np.hypot(bx - x[:, None], by - y[:, None]))
    return np.where(inside, to_line, ends)


def rangefinders(x: np.ndarray, y: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """``[N, 6]`` distance to the nearest wall along each ray, ``RANGE`` when none is hit
    (``maze.h``'s strict segment intersection: parallel lines never intersect)."""
    angle = np.radians(heading[:, None] + RANGEFINDERS)  # [N, 6]
    cx, cy = x[:, None, None], y[:, None, None]  # the ray from C to D, the wall from A to B
    dx = cx + RANGE * np.cos(angle)[..., None]
    dy = cy + RANGE * np.sin(angle)[..., None]
    ax, ay, bx, by = (WALLS[:, k] for k in range(4))
    bot = (bx - ax) * (dy - cy) - (by - ay) * (dx - cx)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = ((ay - cy) * (dx - cx) - (ax - cx) * (dy - cy)) / bot
        s = ((ay - cy) * (bx - ax) - (ax - cx) * (by - ay)) / bot
        hit = (bot != 0) & (r > 0) & (r < 1) & (s > 0) & (s < 1)
        distance = np.hypot(ax + r * (bx - ax) - cx, ay + r * (by - ay) - cy)
    return np.where(hit, distance, RANGE).min(axis=2)


def radar(x: np.ndarray, y: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """``[N, 4]`` one-hot pie slice holding the goal, as seen from the heading."""
    bearing = np.degrees(np.arctan2(GOAL[1] - y, GOAL[0] - x)) - heading
    bearing = np.mod(bearing, 360.0)
    out = np.zeros((len(x), len(SLICES)))
    for k, (lo, hi) in enumerate(SLICES):
        out[:, k] = ((bearing >= lo) & (bearing < hi)) | ((bearing + 360 >= lo) &
                                                          (bearing + 360 < hi))
    return out


def observe(x: np.ndarray, y: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """``[N, 11]`` float32: bias, rangefinders over their range, radar."""
    return np.concatenate([np.ones((len(x), 1)), rangefinders(x, y, heading) / RANGE,
                           radar(x, y, heading)], axis=1).astype(np.float32)


class MazePool(PoolBase):
    """``num_envs`` Hard Mazes stepped together in numpy. The maze has no randomness, so an
    episode depends on its actions alone (the reset seeds are accepted and unused)."""

    def __init__(self, num_envs: int):
        super().__init__(num_envs)
        n = num_envs
        self.x, self.y = np.full(n, START[0]), np.full(n, START[1])
        self.heading, self.speed, self.turn = np.full(n, START_HEADING), np.zeros(n), np.zeros(n)
        self.steps = np.zeros(n, dtype=np.int64)
        self._obs = observe(self.x, self.y, self.heading)
        self._actions: np.ndarray | None = None

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        self.x[mask], self.y[mask] = START
        self.heading[mask], self.speed[mask], self.turn[mask] = START_HEADING, 0.0, 0.0
        self.steps[mask] = 0
        self._obs[mask] = observe(self.x[mask], self.y[mask], self.heading[mask])
        return self._obs.copy()

    def _send(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, 2)

    def _recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        live = self.steps < STEPS  # an ended episode is not stepped until its reset
        a = np.clip(self._actions, -0.5, 0.5)
        self._actions = None
        turn = self.turn + np.clip(GAIN * a[:, 0] - self.turn, -MAX_CHANGE, MAX_CHANGE)
        speed = self.speed + np.clip(GAIN * a[:, 1] - self.speed, -MAX_CHANGE, MAX_CHANGE)
        turn, speed = np.clip(turn, -MAX_SPEED, MAX_SPEED), np.clip(speed, -MAX_SPEED, MAX_SPEED)
        radians = np.radians(self.heading)
        nx, ny = self.x + np.cos(radians) * speed, self.y + np.sin(radians) * speed
        heading = self.heading + turn
        heading = np.where(heading > 360, heading - 360, heading)
        heading = np.where(heading < 0, heading + 360, heading)
        free = (wall_distance(nx, ny) >= RADIUS).all(axis=1)
        self.x = np.where(live & free, nx, self.x)
        self.y = np.where(live & free, ny, self.y)
        self.heading = np.where(live, heading, self.heading)
        self.turn, self.speed = np.where(live, turn, self.turn), np.where(live, speed, self.speed)
        self.steps += live
        done = live & (self.steps >= STEPS)
        rewards = np.where(done, -self.distance_to_goal(), 0.0)
        self._obs[live] = observe(self.x[live], self.y[live], self.heading[live])
        return self._obs.copy(), rewards, done

    def distance_to_goal(self) -> np.ndarray:
        return np.hypot(self.x - GOAL[0], self.y - GOAL[1])

    def behaviour(self, envs: np.ndarray) -> np.ndarray:
        """``[len(envs), 2]`` the final (x, y) of these envs' episodes."""
        return np.stack([self.x[envs], self.y[envs]], axis=1).astype(np.float32)
