"""A run stopped after generation k (budget, or kill -9) and resumed equals one that never stopped."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # runs killed and resumed, each against a straight run

TINY = ["--game", "pong", "--population", "6", "--episode-cap", "25", "--device", "cpu",
        "--set", "algo.elite_candidates=2", "--set", "algo.validation_episodes=2",
        "--set", "engine.slots=2", "--set", "algo.test_episodes=2", "--set", "algo.test_every=1",
        "--set", "env.test_episode_cap=25", "--no-progress"]
DETERMINISTIC = ("generation", "frames", "episodes", "fitness_max", "fitness_mean",
                 "fitness_min", "elite_score", "center_score", "eval_frames", "sigma",
                 "best_fitness", "test_score", "test_score_std", "test_frames")


def neuroevo(*args, cwd):
    return subprocess.run([sys.executable, "-m", "neuroevo", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def rows(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: r.get(k) for k in DETERMINISTIC} for r in map(json.loads, lines)]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("straight")
    out = neuroevo("run", "ga", *TINY, "--generations", "4", "--run-dir", "r", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return cwd / "r"


def test_resume_after_the_budget_equals_an_uninterrupted_run(tmp_path, straight):
    out = neuroevo("run", "ga", *TINY, "--generations", "2", "--run-dir", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "cpu (reference, grouped), run dir r" in out.stdout.splitlines()[0]  # forward path
    assert len(rows(tmp_path / "r")) == 2
    out = neuroevo("run", "ga", *TINY, "--generations", "4", "--run-dir", "r", "--resume",
                   cwd=tmp_path)  # the same as: neuroevo resume r --generations 4
    assert out.returncode == 0, out.stderr
    assert "resuming r after generation 1 (" in out.stdout and "cpu (reference, grouped)" in out.stdout
    assert rows(tmp_path / "r") == rows(straight)
    assert all(r["test_frames"] for r in rows(straight))  # every generation tested
    assert "generations: 4" in (tmp_path / "r" / "config.yaml").read_text()  # the new budget
    assert (json.loads((tmp_path / "r" / "elite.json").read_text())["seeds"] ==
            json.loads((straight / "elite.json").read_text())["seeds"])
    assert len((tmp_path / "r" / "metrics.csv").read_text().splitlines()) == 1 + 4


def test_resume_after_kill_9_equals_an_uninterrupted_run(tmp_path, straight):
    proc = subprocess.Popen([sys.executable, "-m", "neuroevo", "run", "ga", *TINY,
                             "--generations", "4", "--run-dir", "r"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = tmp_path / "r" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (metrics.exists() and metrics.read_text().strip()):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # mid-generation 1 (or later): no chance to clean up
    proc.wait()
    done = len(rows(tmp_path / "r"))
    assert 1 <= done <= 4
    out = neuroevo("resume", "r", cwd=tmp_path)  # the run's own budget: 4 generations
    assert out.returncode == 0, out.stderr
    assert rows(tmp_path / "r") == rows(straight)
    assert not list((tmp_path / "r").rglob("*.tmp"))


def straight_and_resumed(cwd, algo, args, stop, total):
    """Run ``a`` for ``total`` generations and ``b`` for ``stop``, then resume ``b`` to
    ``total``; the two must have the same metrics."""
    assert neuroevo("run", algo, *args, "--generations", str(total), "--run-dir", "a",
                    cwd=cwd).returncode == 0
    assert neuroevo("run", algo, *args, "--generations", str(stop), "--run-dir", "b",
                    cwd=cwd).returncode == 0
    out = neuroevo("resume", "b", "--generations", str(total), cwd=cwd)
    assert out.returncode == 0, out.stderr
    assert rows(cwd / "b") == rows(cwd / "a")


def test_resume_on_cartpole_equals_an_uninterrupted_run(tmp_path):
    cartpole = ["--env", "CartPole-v1", "--population", "10", "--device", "cpu",
                "--set", "algo.elite_candidates=2", "--set", "algo.validation_episodes=2",
                "--set", "algo.test_episodes=2", "--set", "algo.test_every=1", "--no-progress"]
    straight_and_resumed(tmp_path, "ga", cartpole, stop=2, total=4)
    assert rows(tmp_path / "a")[-1]["fitness_max"] > rows(tmp_path / "a")[0]["fitness_mean"]


def test_resume_es_on_mujoco_keeps_the_observation_statistics(tmp_path):
    hopper = ["--env", "Hopper-v5", "--population", "6", "--device", "cpu", "--set",
              "net.hidden=16,16", "--set", "env.obs_stats_fraction=0.5", "--set",
              "algo.validation_episodes=2", "--set", "algo.test_episodes=2", "--set",
              "algo.test_every=1", "--no-progress"]
    straight_and_resumed(tmp_path, "es", hopper, stop=1, total=3)
    from neuroevo.policy.export import load_policy
    saved = load_policy(str(tmp_path / "b" / "policy.safetensors"))
    assert saved.mean.shape == (11,) and saved.clip == 5.0 and not saved.arch["discrete"]


def test_resume_es_after_kill_9_finishes_the_row_its_checkpoint_held(tmp_path):
    """An ES row waits for its centre's episodes, which run in the next generation's pass: a
    checkpoint holds that row, and the resume after kill -9 finishes it as a straight run."""
    hopper = ["--env", "Hopper-v5", "--population", "6", "--device", "cpu", "--set",
              "net.hidden=16,16", "--set", "algo.validation_episodes=2", "--set",
              "algo.test_episodes=2", "--set", "algo.test_every=2", "--no-progress"]
    assert neuroevo("run", "es", *hopper, "--generations", "5", "--run-dir", "a",
                    cwd=tmp_path).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "neuroevo", "run", "es", *hopper,
                             "--generations", "5", "--run-dir", "b"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from neuroevo.checkpoint import RunDir

    run_dir = RunDir(str(tmp_path / "b"))
    deadline = time.time() + 300
    while time.time() < deadline and not run_dir.has_checkpoint():
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = run_dir.load()
    pending = state["totals"].pending
    if state["totals"].generation < 5:  # killed mid-run, as intended
        assert pending["generation"] == state["totals"].generation - 1
        assert "center_score" not in pending and len(state["history"]) == pending["generation"]
    out = neuroevo("resume", "b", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert rows(tmp_path / "b") == rows(tmp_path / "a")
    assert RunDir(str(tmp_path / "b")).load()["totals"].pending is None


def test_resume_es_with_vbn_on_atari_equals_an_uninterrupted_run(tmp_path):
    """OpenAI-ES on Atari (small net with virtual batch normalisation), test phases on: the
    checkpoint and the exported policy carry the reference batch, and a resume whose batch
    differs is refused."""
    args = ["--game", "pong", "--population", "4", "--episode-cap", "25", "--device", "cpu",
            "--set", "net.vbn=true", "--set", "algo.validation_episodes=1", "--set",
            "algo.test_episodes=2", "--set", "algo.test_every=1", "--set",
            "env.test_episode_cap=25", "--set", "engine.slots=2", "--no-progress"]
    straight_and_resumed(tmp_path, "es", args, stop=1, total=3)
    assert all(r["test_frames"] for r in rows(tmp_path / "b"))
    from neuroevo.checkpoint import RunDir
    from neuroevo.policy.export import load_policy
    from neuroevo.serial import read_file, save_file

    saved = load_policy(str(tmp_path / "b" / "policy.safetensors"))
    assert saved.net.vbn and saved.net.vbn_inv_2.shape == (256,)
    state = RunDir(str(tmp_path / "b")).load()
    assert state["vbn_reference"].shape == (128, 4, 84, 84)
    meta, _ = read_file(RunDir(str(tmp_path / "b")).checkpoint)
    state["vbn_reference"] = state["vbn_reference"] // 2  # as if collected by another ale-py
    save_file(RunDir(str(tmp_path / "b")).checkpoint, state, meta=meta)
    out = neuroevo("resume", "b", "--generations", "4", cwd=tmp_path)
    assert out.returncode == 2 and "VBN reference batch differs" in out.stderr


def test_resume_of_a_run_stopped_before_its_first_checkpoint_starts_it_again(tmp_path):
    from neuroevo.checkpoint import RunDir
    from neuroevo.config import Config

    killed = RunDir(str(tmp_path / "r"))
    killed.create(Config())  # what a run killed in generation 0 leaves
    killed.unlock()  # as its end would
    out = neuroevo("run", "ga", *TINY, "--generations", "1", "--run-dir", "r", "--resume",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(rows(tmp_path / "r")) == 1 and "game: pong" in (tmp_path / "r" /
                                                                "config.yaml").read_text()


def test_resume_errors_are_one_line_exit_2(tmp_path):
    out = neuroevo("resume", "nowhere", cwd=tmp_path)
    assert out.returncode == 2 and "run directory nowhere does not exist" in out.stderr
    (tmp_path / "empty").mkdir()
    out = neuroevo("resume", "empty", cwd=tmp_path)
    assert out.returncode == 2 and "not a neuroevo run directory" in out.stderr
    out = neuroevo("run", "ga", *TINY, "--generations", "1", "--run-dir", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (tmp_path / "r" / "checkpoint" / "state.safetensors").write_bytes(b"garbage")
    out = neuroevo("resume", "r", cwd=tmp_path)
    assert out.returncode == 2 and "r/checkpoint/state.safetensors is not a neuroevo state file" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert len(rows(tmp_path / "r")) == 1  # the metrics already written are kept


def test_a_run_directory_from_before_train_episodes_resumes_with_one(tmp_path):
    """A GA ``config.yaml`` and checkpoint identity without ``algo.train_episodes`` were
    written when every member played one training episode: the run loads and resumes with
    1 (not Atari's quick default of 2), and the key is written back."""
    from neuroevo.checkpoint import RunDir, identity
    from neuroevo.errors import CheckpointError

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    quick = ["--config", "experiments/configs/quick_cpu_atari.yaml", "--population", "4",
             "--device", "cpu", "--no-progress", "--set", "algo.test_episodes=0"]
    run = subprocess.run([sys.executable, "-m", "neuroevo", "run", "ga", *quick,
                          "--generations", "1", "--set", "algo.train_episodes=1",
                          "--run-dir", str(tmp_path / "r")], cwd=root, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    config = tmp_path / "r" / "config.yaml"
    line = "  train_episodes: 1\n"
    assert line in config.read_text()
    config.write_text(config.read_text().replace(line, ""))
    run_dir = RunDir(str(tmp_path / "r"))
    cfg = run_dir.load_config()
    assert cfg.algo.train_episodes == 1
    older = {k: v for k, v in identity(cfg).items() if k != "algo.train_episodes"}
    run_dir.check_identity(cfg, older)  # an identity saved before the key: the same run
    cfg.algo.train_episodes = 2
    with pytest.raises(CheckpointError, match=r"algo.train_episodes: 1 -> 2"):
        run_dir.check_identity(cfg, older)
    out = subprocess.run([sys.executable, "-m", "neuroevo", "resume", str(tmp_path / "r"),
                          "--generations", "2", "--no-progress"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert line in config.read_text()  # written back as it ran
