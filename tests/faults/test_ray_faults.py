"""Ray: a local instance on 127.0.0.1 that leaves no process behind, hung actors replaced,
placement and address errors in one line."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from faultkit import CARTPOLE, neuroevo, one_line_error, start, terminate, wait_for_rows

from neuroevo.evaluation import evaluate_one

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # starts local Ray clusters

ray = pytest.importorskip("ray")
RAY = ["--backend", "ray", "--ray-actors", "1"]


def ray_processes() -> set[int]:
    pids = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"/site-packages/ray/" in cmd or cmd.startswith(b"ray::"):
            pids.add(int(pid))
    return pids


def wait_gone(before: set[int], timeout=30) -> set[int]:
    deadline = time.time() + timeout
    while time.time() < deadline and ray_processes() - before:
        time.sleep(0.2)
    return ray_processes() - before


def listening(pids: set[int]) -> list[str]:
    """Local addresses that ``pids`` listen on (TCP)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return [line.split()[3] for line in out.splitlines()
            if any(f"pid={p}," in line for p in pids)]


@pytest.mark.parametrize("stop", [None, signal.SIGINT, signal.SIGTERM])
def test_local_ray_binds_loopback_and_leaves_no_process(tmp_path, stop):
    before = ray_processes()
    proc = start("run", "ga", *CARTPOLE, *RAY, "--generations", "3" if stop is None else "400",
                 "--run-dir", "r", cwd=tmp_path)
    wait_for_rows(tmp_path / "r", 1, proc)
    ours = ray_processes() - before
    addresses = listening(ours)
    assert ours and addresses, "Ray's servers were not found"
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in addresses), addresses
    if stop is None:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    else:
        code, err = terminate(proc, stop)
        assert code == 128 + stop and "Traceback" not in err, err
    assert not wait_gone(before), "Ray processes outlived the driver"


def test_a_ray_address_left_in_the_environment_is_not_joined(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "neuroevo", "run", "ga", *CARTPOLE, *RAY, "--generations", "1",
         "--run-dir", "r"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"})  # nothing listens there
    assert out.returncode == 0, out.stderr


def test_more_actors_than_cpus_is_an_error_not_a_hang(tmp_path):
    one_line_error(neuroevo("run", "ga", *CARTPOLE, "--backend", "ray", "--ray-actors", "64",
                            "--generations", "1", cwd=tmp_path),
                   "64 Ray actors need a CPU each", "use --ray-actors")
    assert not (tmp_path / "runs").exists()


@pytest.fixture
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=128 << 20)
    yield
    ray.shutdown()


def test_a_hung_actor_is_declared_dead_replaced_and_its_members_rerun(cluster):
    from neuroevo.build import build, ray_evaluator
    from neuroevo.config import Config, override

    cfg = Config()
    for key, value in {"algo.name": "ga", "env.id": "CartPole-v1", "algo.population": 24,
                       "engine.device": "cpu", "seed": 3}.items():
        override(cfg, key, value)
    local = build(cfg)
    expected = evaluate_one(local.evaluator, local.optimizer.ask()).fitness
    local.evaluator.close()

    stopped = []

    def stop_once(evaluator, actor):
        if not stopped:  # its queued chunk is in flight and will never come back
            pid = ray.get(evaluator.actors[actor].pid.remote())
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    built = build(cfg, local=False)
    ev = ray_evaluator(built, actors=2, chunks_per_actor=6, timeout=3.0,
                      on_chunk=stop_once)
    try:
        result = evaluate_one(ev, built.optimizer.ask())
        assert stopped and ev.replaced >= 1
        assert np.array_equal(ev.counts, np.ones(24))
        assert np.array_equal(result.fitness, expected)
        assert stopped[0] not in ev.pids()
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ev.close()
