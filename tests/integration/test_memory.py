"""Deep GA at the paper's population size fits in 3 GB plus the noise table on a CPU."""

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a population of 1000 large nets: ~2 minutes

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_memory.py"


def test_population_1000_large_net_peak_rss():
    out = subprocess.run([sys.executable, str(SCRIPT), "--population", "1000",
                          "--generations", "2", "--episode-cap", "5"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["generations"] == 2 and r["episodes"] == 2 * (1000 + 10 * 30)
    assert r["num_params"] > 4_000_000
    assert r["peak_rss_bytes"] < r["budget_bytes"], r
