"""scripts/bench_lowrank.py runs end to end and writes every figure (timings are not tested)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_lowrank.py"


def test_the_lowrank_bench_writes_every_key(tmp_path):
    out = tmp_path / "b.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--env", "HalfCheetah-v5", "--hidden", "16,16",
                          "--population", "32", "--seconds", "0.05", "--rounds", "1",
                          "--generations", "1", "--set", "env.episode_cap=30",
                          "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    for key in ("shared_fwd_per_s", "fullrank_fwd_per_s", "lowrank_fwd_per_s",
                "lowrank_r4_fwd_per_s", "lowrank_ga_fwd_per_s", "engine_lowrank_fps",
                "engine_fullrank_fps", "lowrank_fwd_vs_shared", "engine_lowrank_vs_fullrank"):
        assert result[key] > 0, key
    assert result["task"].endswith("env.episode_cap=30")  # the --set items are measured


def test_an_unknown_set_key_is_refused_before_anything_runs():
    run = subprocess.run([sys.executable, str(SCRIPT), "--set", "env.bogus=1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "unknown config key 'env.bogus'" in run.stderr
    assert "Traceback" not in run.stderr
