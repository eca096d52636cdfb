"""The env ids a new user types (issue 36) through ``neuroevo run``, ``resume``, ``play`` and
``plot``; and a missing optional dependency as one line naming the extra to install."""

import json
import subprocess
import sys

import pytest

from neuroevo import cli

IDS = ["FrozenLake-v1", "Blackjack-v1", "LunarLander-v3", "BipedalWalker-v3",
       pytest.param("ALE/Breakout-v5", marks=pytest.mark.slow)]
SMALL = ["--population", "4", "--device", "cpu", "--episode-cap", "50", "--no-progress",
         "--set", "algo.elite_candidates=1", "--set", "algo.validation_episodes=1",
         "--set", "algo.test_episodes=1", "--set", "env.test_episode_cap=50"]


@pytest.mark.parametrize("env_id", IDS)
def test_run_resume_play_and_plot(tmp_path, monkeypatch, capsys, env_id):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "ga", "--env", env_id, "--generations", "1", *SMALL,
                     "--run-dir", "r"]) == 0
    assert cli.main(["resume", "r", "--generations", "2", "--no-progress"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    assert [r["generation"] for r in rows] == [0, 1]
    capsys.readouterr()
    assert cli.main(["play", "r", "--episodes", "2", "--episode-cap", "30", "--video",
                     "v.gif"]) == 0
    out = capsys.readouterr().out.splitlines()
    first = out[0].split()[1]  # "scores: A B": the video replays episode 1
    assert "over 2 episodes" in out[1] and out[2] == f"wrote v.gif (episode 1, score {first})"
    assert (tmp_path / "v.gif").stat().st_size > 1000
    assert cli.main(["plot", "r", "-o", "c.png"]) == 0 and (tmp_path / "c.png").stat().st_size


@pytest.mark.parametrize("env_id,blocked", [("LunarLander-v3", "Box2D"),
                                            ("BipedalWalker-v3", "pygame")])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, env_id, blocked):
    """The module is made unimportable in a real process, as if it were not installed."""
    code = (f"import sys; sys.modules[{blocked!r}] = None; from neuroevo.cli import main; "
            f"sys.exit(main(['run', 'ga', '--env', {env_id!r}, '--generations', '1']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip() == (f"neuroevo: error: {env_id} needs Box2D and pygame, which "
                                  "are not installed: pip install -e '.[box2d]' in the neuroevo "
                                  "checkout (or pip install 'neuroevo[box2d]')")
    assert not any(tmp_path.iterdir())
