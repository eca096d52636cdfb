"""MuJoCo Warp (``--sim warp``) on Warp's CPU device, against the native envs (which equal
gymnasium v5 bit for bit: test_mujoco.py).

Exactness is measured from identical states: before each of 50 steps with random actions,
the Warp worlds take the native sims' state (qpos, qvel, the solver's warm start, and the
fields a step reads before it moves), so each step's error is that step's alone (free
running, float32 chaos separates HalfCheetah and Ant after 10-15 steps). Tolerances, from
the measurements of 2026-12-06 (4 worlds, seeds 0-3, 50 steps, the largest error of any
step):

| task | obs abs (rel) | reward | termination |
|---|---|---|---|
| Hopper-v5 | 4.7e-6 (4.1e-6) | 4.3e-6 | equal |
| HalfCheetah-v5 | 1.0e-3 (6.9e-4) | 9.0e-6 | never |
| Walker2d-v5 | 1.2e-4 (6.3e-5) | 6.1e-6 | equal |
| Swimmer-v5 | 1.7e-5 (1.1e-5) | 4.9e-6 | never |
| Humanoid-v5 (falls: 4 of 4 by step 50) | 5.0e-2 (1.3e-3) | 1.3e-4 | equal |
| Ant-v5 | 1.4 (clipped contact forces), qvel 0.8 | 0.10 | equal |

so the bound is ``|warp - native| <= tol * (1 + |native|)`` with tol 5e-3 for the planar
tasks and 1e-2 for Humanoid (7-8x the measured), rewards within 1e-4 (1e-3 for Humanoid).
Ant does not reach them: at contact and joint-limit moments one step moves its state by up
to 0.8 (the same with Euler, or without geom margins), so its test holds it to what was
measured and a strict xfail keeps the planar bound on it.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp")

from neuroevo.build import build
from neuroevo.config import Config, override
from neuroevo.engine.slots import step_normals, step_normals_tensor
from neuroevo.envs.mujoco import MujocoSims
from neuroevo.envs.warp import WarpSims, compile_notice, memory_need
from neuroevo.evaluation import Job

CPU = torch.device("cpu")
STEPS, WORLDS = 50, 4
TOLERANCE = {"Hopper-v5": (5e-3, 1e-4), "HalfCheetah-v5": (5e-3, 1e-4),
             "Walker2d-v5": (5e-3, 1e-4), "Swimmer-v5": (5e-3, 1e-4),
             "Humanoid-v5": (1e-2, 1e-3), "Ant-v5": (2.0, 0.25)}


def sync(warp: WarpSims, native: MujocoSims) -> None:
    """Put the native sims' whole state into the Warp worlds."""
    qpos, qvel = (torch.from_numpy(native.fields[k]) for k in ("qpos", "qvel"))
    warp.reset(torch.ones(warp.nworld, dtype=torch.bool), qpos, qvel)
    warm = warp.warp.to_torch(warp.data.qacc_warmstart)
    warm.copy_(torch.from_numpy(np.stack([d.qacc_warmstart for d in native.datas])))
    for name, dst in warp.fields.items():
        dst.copy_(torch.from_numpy(native.fields[name]))


@pytest.fixture(scope="module", params=list(TOLERANCE))
def errors(request):
    """``(env_id, obs, reward, terminated, terminations)``: per step, the largest relative
    observation error, reward error, and the termination mismatches."""
    env_id = request.param
    native = MujocoSims(env_id, WORLDS, threads=1)
    warp = WarpSims(env_id, WORLDS, CPU)
    native.reset(np.arange(WORLDS), list(range(WORLDS)))
    rng, (low, high) = np.random.default_rng(0), native.action_bounds
    obs, reward, mismatched, ended = [], [], 0, 0
    for _ in range(STEPS):
        sync(warp, native)
        actions = rng.uniform(low, high, (WORLDS, len(low))).astype(np.float32)
        native.step_async(actions, np.arange(WORLDS))
        r1, t1 = native.step_wait()
        r2, t2 = warp.step(torch.from_numpy(actions))
        o1 = native.observe()
        obs.append((np.abs(warp.observe().numpy() - o1) / (1 + np.abs(o1))).max())
        reward.append(np.abs(r2.numpy() - r1).max())
        mismatched += int((t2.numpy() != t1).sum())
        ended += int(t1.sum())
    return env_id, np.array(obs), np.array(reward), mismatched, ended


def test_a_step_from_the_same_state_agrees_with_native(errors):
    env_id, obs, reward, mismatched, ended = errors
    obs_tol, reward_tol = TOLERANCE[env_id]
    assert obs.max() <= obs_tol, (env_id, obs.max())
    assert reward.max() <= reward_tol, (env_id, reward.max())
    assert mismatched == 0
    if env_id in ("Hopper-v5", "Walker2d-v5", "Humanoid-v5"):
        assert ended > 0  # falls are among the compared steps


@pytest.mark.xfail(strict=True, reason="Ant-v5 on MuJoCo Warp moves by up to 0.8 in one step "
                   "at contacts and joint limits (module docstring)")
def test_ant_reaches_the_planar_bound(errors):
    env_id, obs, reward, _, _ = errors
    if env_id != "Ant-v5":
        pytest.skip("Ant only")
    assert obs.max() <= 5e-3 and reward.max() <= 1e-4


def test_step_normals_tensor_equals_numpy():
    rng = np.random.default_rng(1)
    seeds, steps = rng.integers(0, 2**31, 500), rng.integers(0, 5000, 500)
    ours = step_normals_tensor(torch.from_numpy(seeds), torch.from_numpy(steps), 17).numpy()
    np.testing.assert_allclose(ours, step_normals(seeds, steps, 17), rtol=0, atol=1e-14)


def config(env_id="Hopper-v5", **sets) -> Config:
    cfg = Config(seed=3)
    for key, value in {"env.id": env_id, "algo.name": "es", "net.name": "mlp",
                       "net.hidden": "16,16", "algo.population": 8, "env.episode_cap": 40,
                       "engine.device": "cpu", "env.obs_stats_fraction": 0.5, **sets}.items():
        override(cfg, key, value)
    return cfg


def one_pass(cfg: Config):
    built = build(cfg)
    try:
        pop = built.optimizer.ask()
        # a training population and, sharing the worlds, a test job with its own cap
        test = built.optimizer.test_population(2)
        jobs = [Job(pop)] + ([Job(test, episode_cap=25)] if test is not None else [])
        return built.evaluator.evaluate(jobs)
    finally:
        built.evaluator.close()


def test_results_do_not_depend_on_the_number_of_worlds_or_checks():
    a = one_pass(config(**{"env.sim": "warp", "engine.slots": 3}))
    b = one_pass(config(**{"env.sim": "warp", "engine.slots": 10}))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.fitness, y.fitness)
        np.testing.assert_array_equal(x.steps, y.steps)
    stats_a, stats_b = a[0].extras["obs_stats"], b[0].extras["obs_stats"]
    assert sorted(stats_a) == sorted(stats_b) and stats_a
    for m in stats_a:
        for u, v in zip(stats_a[m], stats_b[m], strict=True):
            np.testing.assert_array_equal(u, v)


def test_warp_engine_agrees_with_the_native_engine():
    """The same members, seeds, action noise, caps and observation sample: short Hopper
    episodes agree to float32 physics."""
    warp = one_pass(config(**{"env.sim": "warp"}))
    native = one_pass(config())
    for w, n in zip(warp, native, strict=True):
        np.testing.assert_array_equal(w.steps, n.steps)
        np.testing.assert_allclose(w.fitness, n.fitness, rtol=1e-4, atol=1e-4)
    assert sorted(warp[0].extras["obs_stats"]) == sorted(native[0].extras["obs_stats"])
    for m, (total, squares, count) in native[0].extras["obs_stats"].items():
        w_total, w_squares, w_count = warp[0].extras["obs_stats"][m]
        assert w_count == count
        np.testing.assert_allclose(w_total, total, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(w_squares, squares, rtol=1e-3, atol=1e-3)


def test_behaviour_is_the_final_mass_centre_as_native():
    sets = {"algo.name": "nses", "algo.population": 6, "env.episode_cap": 20}
    warp = one_pass(config(**sets, **{"env.sim": "warp"}))[0].extras["bc"]
    native = one_pass(config(**sets))[0].extras["bc"]
    np.testing.assert_allclose(warp, native, atol=1e-4)


def test_memory_of_4096_humanoid_worlds_and_the_paper_population():
    """4,096 worlds of Humanoid-v5 and 4,096 rows of an MLP 256-256: < 8 GB (the issue)."""
    data = memory_need("Humanoid-v5", 4096)
    params = (348 * 256 + 256) + (256 * 256 + 256) + (256 * 17 + 17)
    rows = 4 * params * 4096
    assert data + rows < 8e9, (data, rows)


def test_the_compile_notice_shows_until_the_kernels_are_cached():
    from neuroevo.envs.warp import _marker, warp_device, warp_modules

    warp, mjw = warp_modules()
    marker = _marker(warp, mjw, warp_device(CPU))
    marker.unlink(missing_ok=True)
    assert "compiles its kernels once" in compile_notice(CPU)
    sims = WarpSims("Swimmer-v5", 1, CPU)
    sims.step(torch.zeros(1, 2))
    assert compile_notice(CPU) is None and marker.exists()


def neuroevo(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "neuroevo", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=900, env=env)


TINY = ["--env", "HalfCheetah-v5", "--sim", "warp", "--population", "6", "--episode-cap",
        "15", "--device", "cpu", "--set", "net.hidden=8,8", "--set", "algo.test_episodes=2",
        "--set", "env.test_episode_cap=15", "--set", "algo.test_every=1", "--no-progress"]


def metrics(run_dir):
    keep = ("generation", "frames", "fitness_max", "fitness_mean", "center_score",
            "test_score")
    return [{k: r.get(k) for k in keep} for r in
            map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())]


@pytest.mark.slow
def test_run_trains_on_warp_and_resumes_bit_for_bit(tmp_path):
    out = neuroevo("run", "es", *TINY, "--generations", "3", "--run-dir", "straight",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "sim: warp" in (tmp_path / "straight" / "config.yaml").read_text()
    out = neuroevo("run", "es", *TINY, "--generations", "2", "--run-dir", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = neuroevo("resume", "r", "--generations", "3", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    straight = metrics(tmp_path / "straight")
    assert metrics(tmp_path / "r") == straight and len(straight) == 3
    assert straight[-1]["test_score"] is not None


@pytest.mark.parametrize("args, says", [
    (["--game", "breakout"], "not the Atari game 'breakout'"),
    (["--env", "CartPole-v1"], "not env.id='CartPole-v1'"),
    (["--env", "HumanoidTrap-v0"], "not env.id='HumanoidTrap-v0'"),
    (["--env", "Hopper-v5", "--set", "engine.slots=100000000"], "Warp worlds need"),
    (["--env", "Hopper-v5", "--backend", "ray"], "use --backend local"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, says):
    out = neuroevo("run", "es", "--sim", "warp", *args, "--device", "cpu", "--run-dir", "r",
                   cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], out.stderr
    assert not (tmp_path / "r").exists()


def test_without_warp_sim_warp_names_the_extra(tmp_path):
    """Warp missing: its import fails (a ``None`` entry in ``sys.modules`` is Python's own
    way to make an import raise ImportError)."""
    code = ("import sys; sys.modules['warp'] = None; from neuroevo.cli import main; "
            "sys.exit(main(['run', 'es', '--env', 'Hopper-v5', '--sim', 'warp', '--device', "
            "'cpu', '--run-dir', 'r']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -e '.[warp]'" in lines[0], out.stderr
    assert not (tmp_path / "r").exists()
