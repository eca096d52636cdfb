"""The summary a run ends with and the budget's expected wall time, worked by hand."""

import io
import time

import pytest

from neuroevo.build import resolve
from neuroevo.config import Config
from neuroevo.loop import Budget, Totals
from neuroevo.report import Progress, expected_wall, summary


def _rows():
    return [{"generation": 0, "fitness_max": 7.0, "frames": 1000},
            {"generation": 1, "fitness_max": 12.0, "frames": 2500, "test_score": 9.25,
             "test_score_std": 2.04, "test_episodes": 10},
            {"generation": 2, "fitness_max": 11.0, "frames": 4000}]


def test_a_finished_run_names_its_scores_and_the_next_commands():
    cfg = resolve(Config())
    text = summary("finished", cfg, _rows(), Totals(generation=3, frames=4000), "runs/x",
                   seconds=754.4, video=".gif")
    assert text.splitlines() == [
        "neuroevo: finished ga on breakout: 3 generations, 4,000 frames, 12 min 34 s",
        "  best training episode  12",
        "  test score             9.2 +/- 2.0 (std over 10 episodes of the elite after "
        "generation 1, to 27,000 steps)",
        "  run directory          runs/x",
        "next:",
        "  neuroevo play runs/x --video runs/x/elite.gif",
        "  neuroevo plot runs/x -o runs/x/curves.png",
        "  neuroevo resume runs/x --generations 6"]


def test_a_stopped_run_continues_its_own_budget_and_says_when_nothing_was_kept():
    cfg = Config()
    cfg.algo.name, cfg.env.id = "es", "CartPole-v1"
    cfg = resolve(cfg)
    text = summary("stopped", cfg, _rows()[:1], Totals(generation=1, frames=1000), "r",
                   seconds=3725, video=".mp4")
    assert text.splitlines()[0] == ("neuroevo: stopped es on CartPole-v1: 1 generation, "
                                    "1,000 frames, 1 h 02 min")
    assert "  test score             none yet (every 10 generations and after the last)" in text
    assert text.splitlines()[-1] == "  neuroevo resume r"
    bare = summary("stopped", cfg, [], Totals(), "r", seconds=5, video=".mp4",
                   has_checkpoint=False)
    assert "  best training episode  none yet" in bare
    assert bare.splitlines()[-1] == "next: nothing was kept; start again with 'neuroevo run'"


@pytest.mark.parametrize("budget, expected", [
    (Budget(generations=10), 70.0),  # 2 generations in 20 s, 5 to go
    (Budget(frames=9000), 90.0),  # 2,000 frames in 20 s, 7,000 to go
    (Budget(generations=8, frames=4000), 40.0),  # whichever ends first: the frames
])
def test_expected_wall_time_of_the_budget(budget, expected):
    totals = Totals(generation=5, frames=2000)
    t0 = time.perf_counter() - 20.0  # this session began 20 s ago at generation 3, 0 frames
    assert expected_wall(budget, totals, t0, 3, 0) == pytest.approx(expected, rel=0.01)
    assert expected_wall(budget, totals, t0, 5, 2000) is None  # nothing run yet


def test_the_expected_wall_time_is_told_once_after_the_first_finished_row():
    stream = io.StringIO()
    totals = Totals()
    progress = Progress(stream, False, Budget(generations=4), totals, [])
    totals.generation, totals.frames = 2, 100  # ES: row 0 waits for the centre's episodes
    progress.generation({"generation": 0, "frames": 50, "fps": 10.0}, totals, [])
    totals.generation = 3
    progress.generation({"generation": 1, "frames": 100, "fps": 10.0}, totals, [])
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("gen    0") and lines[2].startswith("gen    1")
    assert lines[1].startswith("  the budget (4 generations) takes about ")
    assert len(lines) == 3
