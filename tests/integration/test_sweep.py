"""scripts/sweep.py on a local Ray instance: trials are run directories, a restarted sweep
skips finished trials and resumes interrupted ones to the results of an uninterrupted sweep."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole sweeps of CLI runs

pytest.importorskip("ray")
SWEEP = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
ARGS = ["--algo", "es", "--set", "env.id=CartPole-v1", "--set", "engine.device=cpu",
        "--grid", "algo.sigma=0.01,0.05", "--grid", "algo.population=10", "--seeds", "0,1"]


def sweep(out, *extra, cwd):
    return subprocess.run([sys.executable, str(SWEEP), out, *ARGS, *extra], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def summary(path):
    with open(path / "summary.csv") as f:
        return [{k: r[k] for k in ("algo.sigma", "algo.population", "seed", "score", "frames",
                                   "run_dir")} for r in csv.DictReader(f)]


def test_sweep_writes_trials_summary_and_resumes(tmp_path):
    out = sweep("a", "--generations", "3", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "4 trials (2 points x 2 seeds), 0 finished before, 4 to run" in out.stdout
    rows = summary(tmp_path / "a")
    assert [(r["algo.sigma"], r["seed"]) for r in rows] == [
        ("0.01", "0"), ("0.01", "1"), ("0.05", "0"), ("0.05", "1")]
    assert (tmp_path / "a" / "summary.png").stat().st_size > 0
    assert (tmp_path / "a" / "trial-001-seed1" / "config.yaml").read_text().count("sigma: 0.05")

    again = sweep("a", "--generations", "3", cwd=tmp_path)
    assert "4 finished before, 0 to run" in again.stdout and summary(tmp_path / "a") == rows

    # Interrupted trials (here: stopped by a smaller budget) are resumed, not restarted, and
    # end where an uninterrupted sweep ends.
    assert sweep("b", "--generations", "2", cwd=tmp_path).returncode == 0
    out = sweep("b", "--generations", "3", cwd=tmp_path)
    assert "0 finished before, 4 to run" in out.stdout
    assert summary(tmp_path / "b") == rows


def test_bad_sweeps_are_one_line_errors(tmp_path):
    assert sweep("d", "--generations", "1", "--seeds", "0", cwd=tmp_path).returncode == 0
    out = sweep("d", "--generations", "1", "--seeds", "0,1", cwd=tmp_path)
    assert out.returncode == 2 and "d holds a different sweep" in out.stderr
    out = sweep("c", "--generations", "1", "--grid", "algo.sigmaa=1", cwd=tmp_path)
    assert out.returncode == 2 and "unknown config key 'algo.sigmaa'" in out.stderr
    out = sweep("c", cwd=tmp_path)
    assert out.returncode == 2 and "--generations N or --frames N" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args,needle", [
    (["--random", "3"], "give at least one --range"),
    (["--random", "0", "--range", "algo.sigma=log:0.01:0.1"], "--random takes the number of"),
    (["--range", "algo.sigma=log:0.01:0.1", "--grid", "algo.sigma=0.1"], "--range goes with"),
    (["--grid", "algo.sigma=0.1", "--seeds", "0,1,0"], "--seeds takes distinct"),
    (["--grid", "algo.truncation=2,3"], "algo.truncation is set but not used")])
def test_more_bad_sweeps(tmp_path, args, needle):
    out = subprocess.run([sys.executable, str(SWEEP), "s", "--algo", "es", "--set",
                          "env.id=CartPole-v1", "--generations", "1", *args],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "s").exists()
