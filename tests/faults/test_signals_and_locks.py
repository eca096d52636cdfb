"""SIGTERM, SIGHUP and Ctrl-C stop a run at once with its last checkpoint; one writer per run."""

import signal

import pytest
from faultkit import CARTPOLE, neuroevo, one_line_error, rows, start, stop, terminate, wait_for_rows

pytestmark = pytest.mark.slow  # real processes stopped by signals


@pytest.mark.parametrize("after", [0, 1, 3])
def test_resume_after_sigterm_equals_an_uninterrupted_run(tmp_path, straight, after):
    proc = start("run", "ga", *CARTPOLE, "--generations", "40", "--run-dir", "r", cwd=tmp_path)
    wait_for_rows(tmp_path / "r", after, proc)
    code, err = terminate(proc, signal.SIGTERM)
    assert code == 143 and "Traceback" not in err, err
    assert "stopped by SIGTERM" in err
    done = len(rows(tmp_path / "r")) if (tmp_path / "r" / "metrics.jsonl").exists() else 0
    assert after <= done < 5
    out = neuroevo("run", "ga", *CARTPOLE, "--generations", "5", "--run-dir", "r", "--resume",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert rows(tmp_path / "r") == rows(straight)
    assert not [p for p in (tmp_path / "r").rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("sig,code", [(signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_sighup_and_ctrl_c_stop_like_sigterm(tmp_path, sig, code):
    proc = start("run", "ga", *CARTPOLE, "--generations", "40", "--run-dir", "r", cwd=tmp_path)
    wait_for_rows(tmp_path / "r", 1, proc)
    returncode, out, err = stop(proc, sig)
    assert returncode == code and "Traceback" not in err, err
    assert "the last checkpoint is kept after generation" in err
    # the summary says what the run got so far, and how to continue it
    kept = len(rows(tmp_path / "r"))
    assert f"neuroevo: stopped ga on CartPole-v1: {kept} generation" in out, out
    assert "  test score             none yet (every 10 generations and after the last)" in out
    assert out.rstrip().endswith("neuroevo resume r"), out
    assert neuroevo("resume", "r", "--generations", "3", cwd=tmp_path).returncode == 0


def test_a_second_writer_is_refused_with_the_pid_of_the_first(tmp_path):
    proc = start("run", "ga", *CARTPOLE, "--generations", "400", "--run-dir", "r", cwd=tmp_path)
    try:
        wait_for_rows(tmp_path / "r", 1, proc)
        for command in (["resume", "r"],
                        ["run", "ga", *CARTPOLE, "--run-dir", "r", "--resume"],
                        ["run", "ga", *CARTPOLE, "--run-dir", "r", "--force"]):
            one_line_error(neuroevo(*command, cwd=tmp_path), f"in use by process {proc.pid}")
        assert (tmp_path / "r" / "checkpoint" / "state.safetensors").exists()  # not cleared
    finally:
        terminate(proc)
    out = neuroevo("resume", "r", "--generations", "3", cwd=tmp_path)  # the lock went with it
    assert out.returncode == 0, out.stderr


def test_default_run_directories_never_collide(tmp_path):
    outs = [start("run", "ga", *CARTPOLE, "--generations", "1", "--seed", "7", cwd=tmp_path)
            for _ in range(2)]
    for proc in outs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all(r.startswith("ga-CartPole-v1-s7-") for r in runs), runs


@pytest.mark.ray
def test_an_interrupted_sweep_prints_no_traceback_and_continues(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    sweep = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
    args = [sys.executable, str(sweep), "s", "--algo", "ga", "--set", "env.id=CartPole-v1",
            "--set", "engine.device=cpu", "--set", "net.hidden=16,16",
            "--grid", "algo.population=10,12", "--generations", "200"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_for_rows(tmp_path / "s" / "runs" / "trial-00000", 1, proc)
    code, err = terminate(proc, signal.SIGINT)
    assert code == 130 and "Traceback" not in err, err
    assert "run the same command again to continue" in err
