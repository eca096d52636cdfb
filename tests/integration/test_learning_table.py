"""scripts/learning_table.py: every cell a run directory, the table read from their test
scores, and a second run that skips finished cells and continues unfinished ones."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "learning_table.py"
spec = importlib.util.spec_from_file_location("learning_table", SCRIPT)
learning_table = sys.modules["learning_table"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(learning_table)  # registered first: its dataclass looks itself up

TINY = ["--games", "pong", "--mujoco", "Hopper-v5", "--seeds", "0,1", "--test-episodes", "2",
        "--set", "algo.population=4", "--set", "env.episode_cap=20",
        "--set", "env.test_episode_cap=20", "--set", "engine.device=cpu"]


def table(out, *extra):
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *TINY, *extra],
                          capture_output=True, text=True, timeout=900)


def last_rows(out):
    runs = sorted((out / "table-runs").glob("*-s[0-9]"))
    return {p.name: json.loads((p / "metrics.jsonl").read_text().splitlines()[-1])
            for p in runs}


def test_bootstrap_interval_of_the_mean():
    assert learning_table.bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)
    lo, hi = learning_table.bootstrap_ci([0.0, 10.0, 20.0])
    assert 0.0 <= lo < 10.0 < hi <= 20.0
    draws = np.random.default_rng(0).choice([0.0, 10.0, 20.0], (10_000, 3)).mean(axis=1)
    assert (lo, hi) == (np.percentile(draws, 2.5), np.percentile(draws, 97.5))


@pytest.mark.slow
def test_cells_table_and_resume(tmp_path):
    out = table(tmp_path, "--frames", "300", "--mujoco-steps", "100")
    assert out.returncode == 0, out.stderr
    first = last_rows(tmp_path)
    assert sorted(first) == ["es-Hopper-v5-s0", "es-Hopper-v5-s1", "ga-pong-s0", "ga-pong-s1",
                             "rs-pong-s0", "rs-pong-s1"]
    assert all(r["test_episodes"] == 2 for r in first.values())
    text = (tmp_path / "table.md").read_text()
    for task, algo in (("pong", "GA"), ("pong", "RS"), ("Hopper-v5", "ES")):
        line = next(x for x in text.splitlines() if x.startswith(f"| {task} | {algo} |"))
        cells = [c.strip() for c in line.split("|")[1:-1]]
        scores = [first[f"{algo.lower()}-{task}-s{s}"]["test_score"] for s in (0, 1)]
        assert cells[2] == "2" and cells[3].startswith(f"{np.mean(scores):,.1f} [")
        assert cells[4] == ", ".join(f"{s:,.0f}" for s in scores)
    assert (tmp_path / "table.png").stat().st_size > 0

    again = table(tmp_path, "--frames", "300", "--mujoco-steps", "100")  # all finished
    assert again.returncode == 0 and "learning_table:" not in again.stdout
    assert last_rows(tmp_path) == first

    more = table(tmp_path, "--frames", "300", "--mujoco-steps", "250")  # a larger budget
    assert more.returncode == 0, more.stderr
    assert "ga-pong" not in more.stdout and "es-Hopper-v5-s0" in more.stdout
    rows = (tmp_path / "table-runs" / "es-Hopper-v5-s0" / "metrics.jsonl").read_text()
    assert json.loads(rows.splitlines()[-1])["frames"] >= 250 > first["es-Hopper-v5-s0"]["frames"]
    assert "resuming" in (tmp_path / "table-runs" / "es-Hopper-v5-s0.log").read_text()

    # A command over some of the cells keeps the others' rows in the table it writes.
    some = table(tmp_path, "--frames", "300", "--mujoco", "", "--report-only")
    assert some.returncode == 0, some.stderr
    kept = (tmp_path / "table.md").read_text()
    assert all(f"| {task} | {algo} | 2 |" in kept
               for task, algo in (("pong", "GA"), ("pong", "RS"), ("Hopper-v5", "ES")))


def test_ranks_are_cells_of_their_own_and_random_search_stays_full_rank():
    args = learning_table.parse(["--games", "pong", "--mujoco", "Hopper-v5", "--seeds", "0",
                                 "--ranks", "0,2", "--set", "engine.device=cpu"])
    by_name = {c.name: c for c in learning_table.cells(args)}
    assert sorted(by_name) == ["es-Hopper-v5-s0", "es-Hopper-v5-s0-r2", "ga-pong-s0",
                               "ga-pong-s0-r2", "rs-pong-s0"]
    for name, cell in by_name.items():
        command = cell.command(cell.run_dir("OUT"))
        sets = [command[i + 1] for i, x in enumerate(command) if x == "--set"]
        assert ("algo.rank=2" in sets) == name.endswith("-r2")
        assert sets.index("engine.device=cpu") < len(sets)  # the user's --set items stay
    assert by_name["ga-pong-s0-r2"].label == "GA, rank 2"
    only_es = learning_table.parse(["--algos", "es", "--games", "", "--mujoco", "Hopper-v5"])
    assert {c.algo for c in learning_table.cells(only_es)} == {"es"}
