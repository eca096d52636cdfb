"""scripts/sweep.py on Ray Tune with Ray's real local cluster: each trial is the run that
``neuroevo run`` makes of its config, ASHA stops trials at its rungs, PBT exploits by copying
a better trial's checkpoint, and a sweep killed with ``kill -9`` finishes when the same
command runs again."""

import contextlib
import csv
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from neuroevo import train
from neuroevo.checkpoint import RunDir
from neuroevo.sweep.trial import run_name

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # whole sweeps on a local Ray instance

SWEEP = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
CARTPOLE = ["--algo", "es", "--set", "env.id=CartPole-v1", "--set", "engine.device=cpu",
            "--set", "net.hidden=8", "--set", "algo.population=8"]
# What a row holds that depends on the machine, not on the run.
TIMING = {"wall_time", "fps", "timings", "occupancy"}


def sweep(out, *extra, cwd, timeout=600, env=None):
    return subprocess.run([sys.executable, str(SWEEP), str(out), *CARTPOLE, *extra],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})})


def summary(out: Path) -> list[dict]:
    with open(out / "summary.csv") as f:
        return list(csv.DictReader(f))


def rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.jsonl") as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def alone(run_dir: Path) -> list[dict]:
    """The rows of the trial's config trained in this process, start to end."""
    history = train(RunDir(str(run_dir)).load_config()).history
    return [json.loads(json.dumps({k: v for k, v in r.items() if k not in TIMING}))
            for r in history]


def sessions(run_dir: Path) -> list[int]:
    with open(run_dir / "run.json") as f:
        return [s["from_generation"] for s in json.load(f)["sessions"]]


def trial_processes(session: int) -> list[int]:
    """The sweep's running trials: Tune's function-trainable actors in its session."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                running = f.read().startswith(b"ray::ImplicitFunc")
            if running and os.getsid(int(pid)) == session:
                pids.append(int(pid))
        except OSError:  # gone meanwhile
            continue
    return pids


def send(pids: list[int], sig: int) -> None:
    for pid in pids:
        # A trial may end meanwhile: Ray reaps a dead driver's workers.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def taken_in(trial: Path) -> list[dict]:
    """The trial's results that Tune's driver has taken in: its logger writes each to
    ``result.json``."""
    try:
        lines = (trial / "result.json").read_text().splitlines()
    except OSError:
        return []
    results = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):  # the line being written
            results.append(json.loads(line))
    return results


def checkpointed_midway(results: list[dict], generations: int) -> bool:
    """Whether a trial with these results has a checkpoint and generations to go."""
    return (bool(results) and results[-1]["generations"] < generations - 2
            and any(r.get("checkpoint_dir_name") for r in results))


def saved_state(out: Path) -> float:
    """When Tune last saved its experiment state (0: never)."""
    return max((p.stat().st_mtime for p in (out / "tune").glob("experiment_state-*.json")),
               default=0)


def saved_midway(out: Path, generations: int) -> str | None:
    """A trial that Tune's last saved experiment state knows a checkpoint of, with
    generations still to go: the state was saved after the driver took in the checkpoint's
    result (its last result is as far on or further) and before the trial came near its
    end. Returns the trial's run directory's name (None: no such trial yet). The state is
    what ``Tuner.restore`` reads; its trials' last results are plain JSON."""
    for path in (out / "tune").glob("experiment_state-*.json"):
        try:
            trials = json.loads(path.read_text())["trial_data"]
        except (OSError, ValueError, KeyError):  # being replaced
            continue
        for _, runtime in trials:
            last = json.loads(runtime).get("last_result") or {}
            if not last or last["generations"] >= generations - 2:
                continue
            for trial in (out / "tune").glob(f"*_{last['trial_id']}_*"):
                results = [r for r in taken_in(trial) if r["generations"] <= last["generations"]]
                if checkpointed_midway(results, generations):
                    return run_name(last["trial_id"])
    return None


def killed_midway(out: Path, proc, generations: int) -> Path:
    """``kill -9`` the sweep's driver, and its trials, once Tune's saved experiment state
    knows a checkpoint of a trial with generations to go; returns that trial's run
    directory.

    Once the driver has taken in such a checkpoint (its ``result.json``), every trial is
    held (SIGSTOP) until the driver, still running, has saved a state that knows it, so the
    kill point does not depend on how fast the machine trains or how late this loop runs:
    a trial cannot finish while the state catches up."""
    deadline = time.time() + 300
    while time.time() < deadline:
        assert proc.poll() is None, ("the sweep ended before it was killed", proc.communicate())
        trials = (out / "tune").glob("*_0000?_*")
        if not any(checkpointed_midway(taken_in(t), generations) for t in trials):
            time.sleep(0.05)
            continue
        held, since = set(), time.time()
        catch_up = since + 30
        # a state saved after the hold began holds all the driver took in (Tune saves it
        # every 0.25 s here); its content then names the trial
        caught = None
        while caught is None and time.time() < catch_up:
            fresh = set(trial_processes(proc.pid)) - held  # the driver may start one
            send(list(fresh), signal.SIGSTOP)
            held |= fresh
            time.sleep(0.05)
            if saved_state(out) > since + 0.3:
                caught = saved_midway(out, generations)
        if caught is None:  # not saved in 30 s: let the trials run on and look again
            send(list(held), signal.SIGCONT)
            continue
        os.kill(proc.pid, signal.SIGKILL)  # the driver, then its trials
        gone = time.time() + 30
        while trial_processes(proc.pid) and time.time() < gone:
            send(trial_processes(proc.pid), signal.SIGKILL)
            time.sleep(0.05)
        send(list(held), signal.SIGKILL)
        proc.communicate()
        return out / "runs" / caught
    raise AssertionError("no trial was checkpointed midway in 300 s")


def test_a_grid_sweep_killed_with_kill_9_is_finished_by_the_same_command(tmp_path):
    """Each trial is the run ``neuroevo run`` makes of its config, whether or not the sweep
    was killed on the way; a finished sweep run again reruns nothing."""
    out = tmp_path / "k"
    # Tune saves its state every 0.25 s here, so the stopped trials wait a moment only.
    args = ["--grid", "algo.sigma=0.01,0.05", "--seeds", "0,1", "--set", "env.episode_cap=200",
            "--generations", "30"]
    proc = subprocess.Popen([sys.executable, str(SWEEP), str(out), *CARTPOLE, *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env={**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "0.25"})
    midway = killed_midway(out, proc, generations=30)

    done = sweep(out, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 trials (grid search, fifo, 2 seeds" in done.stdout
    table = summary(out)
    assert sorted((r["algo.sigma"], r["seed"]) for r in table) == [
        ("0.01", "0"), ("0.01", "1"), ("0.05", "0"), ("0.05", "1")]
    assert {r["status"] for r in table} == {"finished"} and (out / "summary.png").stat().st_size
    for r in table:
        run_dir = out / r["run_dir"]
        cfg = RunDir(str(run_dir)).load_config()
        assert (str(cfg.algo.sigma), str(cfg.seed)) == (r["algo.sigma"], r["seed"])
        if max(sessions(run_dir)) > 0:  # resumed: still the run its config defines
            assert rows(run_dir) == alone(run_dir)
        assert float(r["score"]) == rows(run_dir)[-1]["center_score"]
        assert not (run_dir / ".tune-checkpoint").exists()
    assert max(sessions(midway)) > 0  # killed midway, it continued from its checkpoint
    before = {r["run_dir"]: (out / r["run_dir"] / "metrics.jsonl").read_text() for r in table}

    again = sweep(out, *args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert summary(out) == table
    assert {k: (out / k / "metrics.jsonl").read_text() for k in before} == before

    # The trials are run directories that 'neuroevo resume' continues.
    resumed = subprocess.run([sys.executable, "-m", "neuroevo", "resume",
                              str(out / table[0]["run_dir"]), "--generations", "31",
                              "--no-progress"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert len(rows(out / table[0]["run_dir"])) == 31

    other = sweep(out, *args[:-1], "31", cwd=tmp_path)
    lines = other.stderr.strip().splitlines()
    assert other.returncode == 2 and len(lines) == 1 and "holds a different sweep" in lines[0]


def test_a_pbt_sweep_killed_with_kill_9_is_finished_by_the_same_command(tmp_path):
    """Tune's restored experiment brings back PBT's trials at their checkpoints: every trial
    ends at its budget with one row per generation, every restore (the resume's, an
    exploit's) starts from a checkpoint of the interval's, and the trial caught midway
    continued from a checkpoint (its own, or by an exploit a donor's), not from scratch."""
    out = tmp_path / "pk"
    generations = 10
    args = ["--samples", "4", "--range", "algo.sigma=log:0.002:0.5", "--range",
            "algo.lr=log:0.001:0.1", "--scheduler", "pbt", "--metric", "fitness_mean",
            "--pbt-interval", "2", "--set", "env.episode_cap=200",
            "--generations", str(generations)]
    proc = subprocess.Popen([sys.executable, str(SWEEP), str(out), *CARTPOLE, *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env={**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "0.25"})
    midway = killed_midway(out, proc, generations)
    killed_at = len((midway / "metrics.jsonl").read_text().splitlines())
    earlier = len(sessions(midway))  # PBT pauses trials: a session per sync point

    # PBT restarts each trial's process at every sync point: some 20 restarts, 2-5 s each
    # on a quiet 2-core machine, about 30 s each on one twice overloaded.
    done = sweep(out, *args, cwd=tmp_path, timeout=1800)
    assert done.returncode == 0, done.stderr
    table = summary(out)
    assert len(table) == 4 and {r["status"] for r in table} == {"finished"}
    for r in table:
        run_dir = out / r["run_dir"]
        assert [row["generation"] for row in rows(run_dir)] == list(range(generations))
        assert float(r["score"]) == rows(run_dir)[-1]["fitness_mean"]
        cfg = RunDir(str(run_dir)).load_config()
        assert 0.002 <= cfg.algo.sigma <= 0.5 and 0.001 <= cfg.algo.lr <= 0.1
    # Resumed from a checkpoint it had reported, not started again (ES: a checkpoint after
    # generation 2k holds that generation's row, pending its centre episodes: from 2k + 1).
    resumed = sessions(midway)[earlier]
    assert 0 < resumed <= killed_at + 1 and resumed % 2 == 1
    # Every restore, after the kill or by an exploit, took a checkpoint of the interval's,
    # never the last row's (the budget spent, it trains no more).
    starts = {g for r in table for g in sessions(out / r["run_dir"])}
    assert starts - {0} and all(g == 0 or (g % 2 == 1 and g < generations) for g in starts)
    assert (out / "tune" / "pbt_global.txt").read_text().strip()  # PBT exploited (at some time)

    again = sweep(out, *args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert summary(out) == table


def test_asha_with_optuna_stops_trials_at_its_rungs(tmp_path):
    out = tmp_path / "h"
    done = sweep(out, "--search", "optuna", "--samples", "3", "--seeds", "0,1",
                 "--range", "algo.sigma=log:0.002:0.5", "--scheduler", "asha",
                 "--metric", "fitness_mean", "--grace-period", "1", "--generations", "9",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = summary(out)
    assert len(table) == 6
    # Optuna's points run once per seed (Tune's Repeater).
    points = {}
    for r in table:
        points.setdefault(r["algo.sigma"], []).append(r["seed"])
    assert sorted(map(sorted, points.values())) == [["0", "1"]] * 3
    for r in table:
        generations = len(rows(out / r["run_dir"]))
        assert int(r["generations"]) == generations
        if r["status"] == "stopped early":
            assert generations in (1, 3)  # ASHA's rungs: grace period 1, reduction factor 3
        else:
            assert r["status"] == "finished" and generations == 9
    assert any(r["status"] == "stopped early" for r in table)


def test_pbt_exploits_by_copying_a_better_trials_checkpoint(tmp_path):
    out = tmp_path / "p"
    done = sweep(out, "--samples", "4", "--range", "algo.sigma=log:0.002:0.5",
                 "--range", "algo.lr=log:0.001:0.1", "--scheduler", "pbt",
                 "--metric", "fitness_mean", "--pbt-interval", "2", "--generations", "5",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = summary(out)
    assert len(table) == 4 and {r["status"] for r in table} == {"finished"}
    with open(out / "tune" / "pbt_global.txt") as f:
        exploits = [json.loads(line) for line in f]
    # Exploits at the interval only, never once the budget is spent (ES: from generation 4).
    assert exploits and all(e[2] in (2, 3) for e in exploits)
    # The last exploit: the target took the donor's checkpoint, history included, and went on
    # with the explored values.
    target, donor, _, _, _, explored = exploits[-1]
    index = [int(tag.split("_")[0]) for tag in (target, donor)]
    target_dir, donor_dir = (out / "runs" / f"trial-{i:05d}" for i in index)
    assert rows(target_dir)[:2] == rows(donor_dir)[:2]
    own = [json.loads(line) for line in
           next((out / "tune").glob(f"*_{index[0]:05d}_*/result.json")).open()]
    assert own[0]["fitness_mean"] != rows(donor_dir)[0]["fitness_mean"]  # it was another run
    cfg = RunDir(str(target_dir)).load_config()
    assert (cfg.algo.sigma, cfg.algo.lr) == (explored["algo.sigma"], explored["algo.lr"])
    assert 0.002 <= cfg.algo.sigma <= 0.5 and 0.001 <= cfg.algo.lr <= 0.1  # kept in range
    assert 3 in sessions(target_dir)  # restored at the donor's checkpoint (ES: gen 2 pending)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trials_on_a_cluster_with_a_gpu_ask_for_a_share_of_it(tmp_path):
    """On a Ray cluster of 2 CPUs and 1 GPU (Ray schedules what a node declares), each
    1-CPU trial asks for half the GPU, the trials its CPUs run at once sharing it out, and
    records its share in ``run.json``; ``--gpus-per-trial`` sets another. The cluster has
    token authentication, with a token of its own: a sweep told nothing is refused in one
    line that names the fix."""
    token = secrets.token_hex(32)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    bare = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must be short
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head",
                             "--block", f"--port={port}", f"--temp-dir={temp}",
                             f"--ray-client-server-port={free_port()}", "--num-cpus=2",
                             "--num-gpus=1", "--include-dashboard=false",
                             "--disable-usage-stats"], env={**bare, **auth},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while not list(Path(temp).glob("session_*/sockets/raylet")):
            assert head.poll() is None and time.time() < deadline, "ray start failed"
            time.sleep(0.2)
        args = ["--grid", "algo.sigma=0.01,0.05", "--generations", "2", "--ray-address",
                f"127.0.0.1:{port}"]
        refused = subprocess.run([sys.executable, str(SWEEP), str(tmp_path / "r"), *CARTPOLE,
                                  *args], capture_output=True, text=True, cwd=tmp_path,
                                 timeout=300, env=bare)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, refused.stderr
        assert "RAY_AUTH_MODE=token" in lines[0]
        for extra, share in (((), 0.5), (("--gpus-per-trial", "1"), 1.0)):
            out = tmp_path / f"g{share}"
            done = sweep(out, *args, *extra, cwd=tmp_path, env=auth)
            assert done.returncode == 0, done.stderr
            for r in summary(out):
                with open(out / r["run_dir"] / "run.json") as f:
                    first = json.load(f)["sessions"][0]
                assert first["trial_resources"] == {"CPU": 1, "GPU": share}
                assert first["device"] == "cpu"  # the GPU is declared, not there
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # ray start --block stops its cluster
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_novelty_sweep_s_trials_are_their_runs_archives_included(tmp_path):
    """NSR-ES on the maze, a grid over k: each trial is the run its config makes, novelty
    and archive included, and it is ranked by the best training episode (the NS family
    validates no centre score)."""
    out = tmp_path / "ns"
    done = subprocess.run(
        [sys.executable, str(SWEEP), str(out), "--algo", "nsres", "--set", "env.id=HardMaze-v0",
         "--set", "engine.device=cpu", "--set", "net.hidden=8", "--set", "algo.population=10",
         "--set", "algo.test_episodes=0", "--grid", "algo.k=3,10", "--generations", "3"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "ranked by fitness_max" in done.stdout
    table = summary(out)
    assert sorted(r["algo.k"] for r in table) == ["10", "3"]
    for r in table:
        got = rows(out / r["run_dir"])
        assert got == alone(out / r["run_dir"]) and len(got) == 3
        assert all(row["archive_size"] > 0 and row["novelty_mean"] > 0 for row in got)
        assert float(r["score"]) == got[-1]["fitness_max"]
    assert rows(out / table[0]["run_dir"]) != rows(out / table[1]["run_dir"])


def test_the_python_api_example_runs_an_asha_sweep_of_run_directories(tmp_path):
    """experiments/sweeps/custom_sweep.py, as its README runs it: 8 trials drawn from its
    ranges, ASHA stopping some at its rungs, and the best that it names."""
    example = Path(__file__).resolve().parents[2] / "experiments" / "sweeps" / "custom_sweep.py"
    out = tmp_path / "c"
    done = subprocess.run([sys.executable, str(example), str(out)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    named = re.fullmatch(r"best centre score (\S+) with sigma \S+, lr \S+: (\S+)",
                         done.stdout.strip().splitlines()[-1])
    assert named, done.stdout
    trials = sorted((out / "runs").iterdir())
    assert len(trials) == 8 and Path(named[2]) in trials
    lengths = []
    for run_dir in trials:
        cfg = RunDir(str(run_dir)).load_config()
        assert 0.005 <= cfg.algo.sigma <= 0.2 and 0.003 <= cfg.algo.lr <= 0.1
        reported = [json.loads(line) for line in
                    next((out / "tune").glob(f"*_{run_dir.name[-5:]}_*")).joinpath(
                        "result.json").read_text().splitlines()]
        # Tune took in the run's own rows, and ASHA stopped it at a rung or it finished:
        # grace period 2, reduction factor 4, 20 generations.
        assert [r["center_score"] for r in reported] == [r["center_score"] for r in rows(run_dir)]
        lengths.append(len(reported))
        if run_dir == Path(named[2]):
            assert named[1] == f"{reported[-1]['center_score']:g}"
    assert set(lengths) <= {2, 8, 20} and min(lengths) < 20, lengths
