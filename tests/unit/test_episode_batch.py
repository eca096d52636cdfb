"""``EpisodeBatch``: the one merge (``combine``), its inverse over a pass's jobs (``split``),
and the extras it carries, worked by hand."""

import numpy as np
import pytest

from neuroevo import evaluation
from neuroevo.evaluation import EpisodeBatch, Job


def part(fitness, steps, frames, wall, timings, computed, offered, comm=0, **extras):
    return EpisodeBatch(np.array(fitness, float), np.array(steps), frames, wall, timings,
                        computed, offered, comm, extras)


A = part([1.0, 3.0], [10, 30], 160, 2.0, {"forward": 1.0, "env_wait": 0.5}, 30, 40, comm=100,
         obs_stats={0: [1.0, 1.0, 1]})
B = part([2.0], [20], 80, 1.0, {"forward": 0.25, "decode": 0.1}, 10, 40, comm=50,
         obs_stats={1: [2.0, 4.0, 2]})


@pytest.fixture
def descriptors(monkeypatch):
    """A per-episode extra, as a behaviour descriptor will be: a [P, 2] array."""
    monkeypatch.setitem(evaluation.EXTRAS, "bc", "episodes")


def test_parts_that_ran_at_once():
    r = EpisodeBatch.combine([(np.array([0, 2]), A), (np.array([1]), B)], 3, wall_time=2.5)
    assert r.fitness.tolist() == [1.0, 2.0, 3.0] and r.steps.tolist() == [10, 20, 30]
    assert r.frames == 240 and r.wall_time == 2.5 and r.comm_bytes == 150
    # 40 of 80 slot rows computed: 0.5, not the members' weighted mean of 0.75 and 0.25
    assert (r.computed, r.offered) == (40, 80) and r.occupancy == 0.5
    assert r.timings == pytest.approx({"forward": 1.25, "env_wait": 0.5, "decode": 0.1})
    assert r.extras == {"obs_stats": {0: [1.0, 1.0, 1], 1: [2.0, 4.0, 2]}}


def test_phases_one_after_another_are_counted_not_placed():
    r = EpisodeBatch.combine([(None, A), (None, B)])
    assert len(r.fitness) == 0 and r.frames == 240 and r.wall_time == 3.0
    assert r.occupancy == 0.5 and EpisodeBatch.combine([]).occupancy == 0.0


def test_per_episode_extras_are_placed_like_fitness(descriptors):
    a = part([1.0, 3.0], [10, 30], 160, 2.0, {}, 0, 0, bc=[[0.0, 1.0], [2.0, 3.0]])
    b = part([2.0], [20], 80, 1.0, {}, 0, 0, bc=[[4.0, 5.0]])
    r = EpisodeBatch.combine([(np.array([0, 2]), a), (np.array([1]), b)], 3)
    assert r.extras["bc"].tolist() == [[0.0, 1.0], [4.0, 5.0], [2.0, 3.0]]
    assert EpisodeBatch.concat([a, b]).extras["bc"].tolist() == [[0, 1], [2, 3], [4, 5]]
    kept = r.select(np.array([True, False, True]))
    assert kept.fitness.tolist() == [1.0, 3.0] and kept.extras["bc"].tolist() == [[0, 1], [2, 3]]
    assert kept.frames == r.frames  # what was spent stays counted


def test_a_pass_splits_into_its_jobs_with_the_costs_on_the_first(descriptors):
    whole = part([1.0, 2.0, 3.0], [10, 20, 30], 0, 2.5, {"forward": 1.0}, 60, 80,
                 obs_stats={4: [1.0, 1.0, 1]}, bc=[[0.0], [1.0], [2.0]])
    first, second = whole.split([Job([None] * 2), Job([None] * 5, np.array([3]))], 4)
    assert first.fitness.tolist() == [1.0, 2.0] and second.fitness.tolist() == [3.0]
    assert (first.frames, second.frames) == (120, 120)  # steps x frameskip
    assert first.extras["bc"].tolist() == [[0.0], [1.0]]
    assert second.extras["bc"].tolist() == [[2.0]]
    assert first.extras["obs_stats"] == {4: [1.0, 1.0, 1]} and "obs_stats" not in second.extras
    assert (first.wall_time, first.computed, first.timings) == (2.5, 60, {"forward": 1.0})
    assert (second.wall_time, second.computed, second.timings) == (0.0, 0, {})
    back = EpisodeBatch.combine([(np.arange(2), first), (np.arange(2, 3), second)], 3, 2.5)
    assert back.fitness.tolist() == whole.fitness.tolist() and back.frames == 240


def test_an_undeclared_extra_is_refused():
    with pytest.raises(ValueError, match="not declared in"):
        part([1.0], [1], 1, 0.1, {}, 0, 0, novelty=[0.5])
