"""A resume continues the same run: another config is refused; derived files are refreshed."""

import shutil

import pytest
import torch
from faultkit import CARTPOLE, neuroevo, one_line_error, rows
from safetensors.torch import load_file


@pytest.mark.parametrize("edit,shown", [
    (("env:\n  game: breakout\n  id: CartPole-v1", "env:\n  game: pong\n  id: CartPole-v1"),
     "env.game: 'breakout' -> 'pong'"),
    (("seed: 0", "seed: 3"), "seed: 0 -> 3"),
    (("population: 10", "population: 12"), "algo.population: 10 -> 12")])
def test_a_config_edited_into_another_run_is_refused(tmp_path, two, edit, shown):
    shutil.copytree(two, tmp_path / "r")
    config = tmp_path / "r" / "config.yaml"
    text = config.read_text()
    assert edit[0] in text
    config.write_text(text.replace(*edit))
    one_line_error(neuroevo("resume", "r", cwd=tmp_path), shown, "restore config.yaml")


def test_a_changed_budget_is_allowed(tmp_path, two, straight):
    shutil.copytree(two, tmp_path / "r")
    config = tmp_path / "r" / "config.yaml"
    config.write_text(config.read_text().replace("generations: 2", "generations: 5"))
    assert neuroevo("resume", "r", cwd=tmp_path).returncode == 0
    assert rows(tmp_path / "r") == rows(straight)


def test_run_resume_with_another_config_is_refused(tmp_path, two):
    shutil.copytree(two, tmp_path / "r")
    out = neuroevo("run", "ga", *CARTPOLE, "--seed", "5", "--run-dir", "r", "--resume",
                   cwd=tmp_path)
    one_line_error(out, "seed: 0 -> 5")
    out = neuroevo("run", "ga", *CARTPOLE, "--generations", "3", "--run-dir", "r", "--resume",
                   cwd=tmp_path)  # the same run with a longer budget
    assert out.returncode == 0, out.stderr
    assert len(rows(tmp_path / "r")) == 3


def test_elite_and_policy_are_refreshed_on_resume(tmp_path, two):
    shutil.copytree(two, tmp_path / "r")
    run = tmp_path / "r"
    elite, policy = (run / "elite.json").read_bytes(), load_file(run / "policy.safetensors")
    (run / "elite.json").write_text("stale")
    (run / "policy.safetensors").unlink()
    assert neuroevo("resume", "r", cwd=tmp_path).returncode == 0  # budget spent: no generation
    assert (run / "elite.json").read_bytes() == elite
    again = load_file(run / "policy.safetensors")
    assert again.keys() == policy.keys() and all(torch.equal(again[k], policy[k]) for k in policy)


def scalars(run, tag="fitness_max"):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return [e.step for e in events.Scalars(tag)]


def test_force_removes_every_file_of_the_old_run(tmp_path, two):
    shutil.copytree(two, tmp_path / "r")
    run = tmp_path / "r"
    (run / "policy.pt").write_bytes(b"an old pickle")
    (run / ".neuroevo-stale.tmp").write_bytes(b"")
    (run / "notes.txt").write_text("the user's own")
    out = neuroevo("run", "es", "--env", "CartPole-v1", "--population", "6", "--set",
                   "net.hidden=8", "--generations", "1", "--run-dir", "r", "--force",
                   "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert not (run / "elite.json").exists() and not (run / "policy.pt").exists()
    assert not (run / ".neuroevo-stale.tmp").exists()
    assert (run / "notes.txt").read_text() == "the user's own"
    assert scalars(run) == [r["frames"] for r in rows(run)]  # no GA events left


def test_tensorboard_keeps_every_point_across_a_resume(tmp_path, two):
    shutil.copytree(two, tmp_path / "r")
    assert neuroevo("resume", "r", "--generations", "4", cwd=tmp_path).returncode == 0
    assert scalars(tmp_path / "r") == [r["frames"] for r in rows(tmp_path / "r")]
