"""Helpers of the fault-injection suite: real processes, signals, files and mounts."""

import json
import os
import signal
import subprocess
import sys
import time

# A GA on CartPole: a generation takes a fraction of a second, results depend on the seed only.
CARTPOLE = ["--env", "CartPole-v1", "--population", "10", "--device", "cpu",
            "--set", "net.hidden=16,16", "--set", "algo.elite_candidates=2",
            "--set", "algo.validation_episodes=2", "--set", "algo.test_episodes=2",
            "--no-progress"]
DETERMINISTIC = ("generation", "frames", "episodes", "fitness_max", "fitness_mean",
                 "fitness_min", "elite_score", "center_score", "eval_frames", "sigma",
                 "best_fitness")  # a run's test rows depend on its budget: left out


def neuroevo(*args, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "neuroevo", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def start(*args, cwd):
    """A ``neuroevo`` process in the background, its output in pipes."""
    return subprocess.Popen([sys.executable, "-m", "neuroevo", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: r.get(k) for k in DETERMINISTIC} for r in map(json.loads, lines)]


def wait_for_rows(run_dir, n, proc=None, timeout=300):
    """Wait until ``run_dir`` holds ``n`` checkpointed generations."""
    deadline = time.time() + timeout
    path = run_dir / "metrics.jsonl"
    while time.time() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.stderr.read()}")
        time.sleep(0.02)
    raise AssertionError(f"{path} did not reach {n} rows in {timeout} s")


def one_line_error(out, *needles):
    """Exit 2, one line on stderr that holds every needle, no traceback."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def terminate(proc, sig=signal.SIGTERM):
    code, _, err = stop(proc, sig)
    return code, err


def stop(proc, sig=signal.SIGTERM):
    """``(exit status, stdout, stderr)`` of ``proc`` stopped by ``sig``."""
    os.kill(proc.pid, sig)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out, err
