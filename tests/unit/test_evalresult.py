"""``EvalResult.combine``, the one merge, worked by hand."""

import numpy as np
import pytest

from neuroevo.engine.pipeline import EvalResult


def part(fitness, steps, frames, wall, timings, computed, offered, stats=None, comm=0):
    return EvalResult(np.array(fitness, float), np.array(steps), frames, wall, timings,
                      computed, offered, stats or {}, comm)


A = part([1.0, 3.0], [10, 30], 160, 2.0, {"forward": 1.0, "env_wait": 0.5}, 30, 40,
         {0: [1.0, 1.0, 1]}, comm=100)
B = part([2.0], [20], 80, 1.0, {"forward": 0.25, "decode": 0.1}, 10, 40, {1: [2.0, 4.0, 2]},
         comm=50)


def test_parts_that_ran_at_once():
    r = EvalResult.combine([(np.array([0, 2]), A), (np.array([1]), B)], 3, wall_time=2.5)
    assert r.fitness.tolist() == [1.0, 2.0, 3.0] and r.steps.tolist() == [10, 20, 30]
    assert r.frames == 240 and r.wall_time == 2.5 and r.comm_bytes == 150
    # 40 of 80 slot rows computed: 0.5, not the members' weighted mean of 0.75 and 0.25
    assert (r.computed, r.offered) == (40, 80) and r.occupancy == 0.5
    assert r.timings == pytest.approx({"forward": 1.25, "env_wait": 0.5, "decode": 0.1})
    assert r.obs_stats == {0: [1.0, 1.0, 1], 1: [2.0, 4.0, 2]}


def test_phases_one_after_another_are_counted_not_placed():
    r = EvalResult.combine([(None, A), (None, B)])
    assert len(r.fitness) == 0 and r.frames == 240 and r.wall_time == 3.0
    assert r.occupancy == 0.5 and EvalResult.combine([]).occupancy == 0.0
