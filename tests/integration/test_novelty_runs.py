"""Novelty search through the whole engine: the Hard Maze's built-in behaviour, runs and
resumes through the CLI, the same run on any layout, and the one-line refusals."""

import pathlib

import numpy as np
import pytest

from neuroevo import cli, train
from neuroevo.build import resolve
from neuroevo.checkpoint import RunDir
from neuroevo.config import load
from neuroevo.errors import ConfigError
from neuroevo.play import play

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "configs"
MAZE = ["--env", "HardMaze-v0", "--population", "8", "--set", "net.hidden=8",
        "--no-progress", "--set", "algo.test_episodes=1"]
TIMING = ("wall_time", "fps", "timings", "occupancy")
LOGGING = ("test_score", "test_score_std", "test_episodes", "test_frames")


def rows_of(path, strip=TIMING + LOGGING):
    return [{k: v for k, v in r.items() if k not in strip}
            for r in RunDir(str(path)).load()["history"]]


GRID = ["--set", "algo.grid_low=0,0", "--set", "algo.grid_high=200,210"]
CVT = [*GRID, "--set", "algo.cvt_cells=40", "--set", "algo.cvt_samples=4000"]


@pytest.mark.parametrize("algo, extra, archive", [("nsraes", [], "archive"),
                                                 ("gans", [], "archive"),
                                                 ("mapelites", GRID, "fitness"),
                                                 ("mapelites", CVT, "fitness")])
def test_a_run_resumes_bit_for_bit_with_its_archive_and_plays(algo, extra, archive, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = ["run", algo, *MAZE, *extra]
    assert cli.main([*run, "--generations", "2", "--run-dir", "a"]) == 0
    assert cli.main(["resume", "a", "--generations", "4", "--no-progress"]) == 0
    assert cli.main([*run, "--generations", "4", "--run-dir", "b"]) == 0
    assert rows_of(tmp_path / "a") == rows_of(tmp_path / "b")
    states = [RunDir(str(tmp_path / d)).load()["optimizer"]["state"] for d in "ab"]
    assert states[0][archive].equal(states[1][archive])
    scores, _ = play(RunDir(str(tmp_path / "a")), episodes=1)
    assert -scores[0] < 250  # a distance to the goal, inside the maze


def test_map_elites_on_walker_feet_contact_resumes_bit_for_bit_on_any_layout(tmp_path,
                                                                              monkeypatch):
    """QDax's Walker2d setting in small: each cell's BC is the two feet's share of steps on
    the ground, in [0, 1]; the run is the same on 1 and 2 workers and resumed."""
    monkeypatch.chdir(tmp_path)
    run = ["run", "mapelites", "--env", "Walker2d-v5", "--set", "env.behaviour=feet_contact",
           "--set", "algo.grid_low=0,0", "--set", "algo.grid_high=1,1", "--set",
           "algo.bins=5", "--population", "8", "--net", "mlp", "--set", "net.hidden=8",
           "--no-progress", "--set", "algo.test_episodes=1"]
    assert cli.main([*run, "--generations", "2", "--run-dir", "a"]) == 0
    assert cli.main(["resume", "a", "--generations", "3", "--no-progress"]) == 0
    assert cli.main([*run, "--generations", "3", "--set", "engine.workers=2", "--run-dir",
                     "b"]) == 0
    assert rows_of(tmp_path / "a") == rows_of(tmp_path / "b")
    states = [RunDir(str(tmp_path / d)).load()["optimizer"]["state"] for d in "ab"]
    assert states[0]["fitness"].equal(states[1]["fitness"])
    filled = states[0]["bcs"][states[0]["fitness"].isfinite()]
    assert len(filled) > 1 and ((filled >= 0) & (filled <= 1)).all()


def test_play_picks_an_archive_member(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "mapelites", *MAZE, *GRID, "--generations", "2", "--run-dir",
                     "m"]) == 0
    state = RunDir(str(tmp_path / "m")).load()["optimizer"]["state"]
    cell = sorted(state["cells"])[0]
    scores, _ = play(RunDir(str(tmp_path / "m")), episodes=1, member=cell)
    assert scores[0] == pytest.approx(float(state["fitness"][cell]))  # the maze is deterministic
    capsys.readouterr()
    assert cli.main(["play", "m", "--member", str(cell + 1000), "--episodes", "1"]) == 2
    assert f"cell {cell + 1000} of the MAP-Elites grid is empty" in capsys.readouterr().err


def test_the_maze_run_is_the_same_on_any_layout():
    common = dict(algo__name="nsres", env__id="HardMaze-v0", algo__population=10,
                  net__hidden="8", engine__device="cpu", budget__generations=3, seed=2)
    runs = [[{k: v for k, v in r.items() if k not in TIMING}
             for r in train(**common, **layout).history]
            for layout in ({}, {"engine__workers": 2, "engine__subsets": 2, "engine__slots": 3})]
    assert runs[0] == runs[1]
    assert [r["archive_size"] for r in runs[0]] == [6, 7, 8]  # 5 centres, then 1 a generation


def test_no_behaviour_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "nses", "--env", "CartPole-v1", "--run-dir", "r"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nses needs a behaviour characterisation and " \
        "CartPole-v1 has none built in; give one: neuroevo.train(..., behaviour=fn)" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("behaviour, message", [
    (lambda obs: obs[:3] if obs[0] > 0 else obs[:2],
     r"the behaviour characterisation of member \d \(generation 0, phase validate\) has "
     r"shape \((2|3),\), expected \((2|3),\)"),
    (lambda obs: np.array([np.nan, 1.0]),
     r"the behaviour characterisation of member \d \(generation 0, phase validate\) is not "
     r"finite: \[nan, 1.0\]"),
])
def test_a_bad_behaviour_function_names_the_member_and_episode(behaviour, message):
    with pytest.raises(ConfigError, match=message):
        train(algo__name="nses", env__id="CartPole-v1", algo__population=6,
              engine__device="cpu", budget__generations=1, behaviour=behaviour)


def test_plot_draws_the_archives_and_refuses_a_run_without_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for algo, extra, where in (("nses", [], "nses"), ("mapelites", GRID, "mapelites"),
                               ("mapelites", CVT, "cvt"), ("ga", [], "ga")):
        assert cli.main(["run", algo, *MAZE, *extra, "--generations", "2", "--run-dir",
                         where]) == 0
    assert cli.main(["plot", "nses", "mapelites", "cvt", "--archive", "-o", "a.png"]) == 0
    assert (tmp_path / "a.png").stat().st_size > 10_000
    capsys.readouterr()
    assert cli.main(["plot", "ga", "--archive", "-o", "b.png"]) == 2
    assert "ga run, which keeps no behaviour archive" in capsys.readouterr().err
    assert not (tmp_path / "b.png").exists()


@pytest.mark.parametrize("name, population, centres, bc_episodes", [
    ("nses_humanoid", 1000, 5, 5), ("nsres_humanoid", 1000, 5, 5),
    ("nses_frostbite", 100, 3, 1), ("nsres_frostbite", 1000, 3, 1),
    ("nses_frostbite_cpu", 64, 3, 1), ("nsres_frostbite_cpu", 64, 3, 1)])
def test_the_authors_configs_resolve_with_their_settings(name, population, centres,
                                                         bc_episodes):
    """Uber's configurations/{humanoid,frostbite}_{nses,nsres}.json: episodes_per_batch,
    novelty_search.population_size and num_rollouts, k = 10, sigma 0.02 (the CPU-sized
    Frostbite configs: 64 members, the rest theirs)."""
    cfg = resolve(load(str(CONFIGS / f"{name}.yaml")))
    a = cfg.algo
    assert (a.population, a.centres, a.bc_episodes, a.k, a.sigma) == (
        population, centres, bc_episodes, 10, 0.02)


@pytest.mark.parametrize("sets, message", [
    (["--set", "algo.k=0"], "algo.k must be >= 1, got 0"),
    (["--set", "algo.grid_low=0,0", "--set", "algo.grid_high=0,5"],
     "algo.grid_high must be above algo.grid_low in every dimension"),
])
def test_bad_novelty_settings_are_one_line_and_write_nothing(sets, message, tmp_path,
                                                            monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    algo = "mapelites" if "algo.grid_low=0,0" in sets else "nses"
    assert cli.main(["run", algo, "--env", "HardMaze-v0", *sets, "--run-dir", "r"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err
    assert not (tmp_path / "r").exists()
