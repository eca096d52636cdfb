"""End to end: every optimizer trains on Atari through the evaluator, from Python and the CLI."""

import csv
import json
import os
import pathlib
import subprocess
import sys
import threading

import pytest
import torch
import yaml

from neuroevo import SeedChain, train
from neuroevo.build import build, resolve
from neuroevo.config import Config, override
from neuroevo.evaluation import evaluate_one

# Test phases of 2 episodes, cut at the training cap: short, and they still run.
TINY = dict(env__game="pong", env__episode_cap=25, env__test_episode_cap=25,
            algo__test_episodes=2, net__name="small", algo__population=6,
            algo__elite_candidates=2, algo__validation_episodes=2, engine__device="cpu",
            engine__subsets=2, engine__slots=2, budget__generations=2)


@pytest.mark.parametrize("algo", ["ga", "es", "rs"])
def test_every_optimizer_trains_end_to_end(algo):
    unused = {"algo__elite_candidates"} if algo == "es" else set()  # an error if given
    result = train(algo__name=algo, **{k: v for k, v in TINY.items() if k not in unused})
    rows = result.history
    assert [r["generation"] for r in rows] == [0, 1]
    # GA and RS: two training episodes a member on Atari (the quick default), then 2 x 2
    training, validation = (6, 0) if algo == "es" else (6 * 2, 2 * 2)
    per_generation = training + validation
    assert rows[0]["episodes"] == per_generation and rows[1]["episodes"] == 2 * per_generation
    assert rows[1]["frames"] > rows[0]["frames"] > 0 and rows[1]["wall_time"] > 0
    for r in rows:
        assert r["fitness_max"] >= r["fitness_mean"] >= r["fitness_min"]
        assert 0 < r["occupancy"] <= 1 and r["fps"] > 0
    if algo != "es":
        assert "elite_score" in rows[0] and result.optimizer.elite is not None


def test_same_seed_same_metrics_whatever_the_layout():
    def run(**layout):
        history = train(algo__name="ga", **{**TINY, **layout}).history
        return [(r["fitness_max"], r["fitness_mean"], r["elite_score"], r["frames"]) for r in history]
    assert run() == run(engine__subsets=1, engine__slots=6, engine__env_threads=1)


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "neuroevo", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_cli_run_writes_a_run_directory(tmp_path):
    out = cli("run", "ga", "--game", "pong", "--population", "6", "--generations", "2",
              "--episode-cap", "25", "--set", "algo.elite_candidates=2",
              "--set", "env.test_episode_cap=25",
              "--set", "algo.validation_episodes=2", "--run-dir", "r", "--device", "cpu",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\ngen ") == 2
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == [0, 1]
    # the test score after the last generation only (test_every 10), outside the budget
    assert "test_score" not in rows[0] and rows[-1]["test_episodes"] == 30
    assert "  test " in [line for line in out.stdout.splitlines() if line.startswith("gen ")][-1]
    assert "  the budget (2 generations) takes about " in out.stdout
    # the summary it ends with: what metrics.jsonl holds, and the next commands
    summary = out.stdout[out.stdout.index("neuroevo: finished"):].splitlines()
    last = rows[-1]
    assert summary[0].startswith(f"neuroevo: finished ga on pong: 2 generations, "
                                 f"{last['frames']:,} frames, ")
    assert summary[1:] == [
        f"  best training episode  {max(r['fitness_max'] for r in rows):g}",
        f"  test score             {last['test_score']:.1f} +/- {last['test_score_std']:.1f} "
        "(std over 30 episodes of the elite after generation 1, to 25 steps)",
        "  run directory          r",
        "next:",
        f"  neuroevo play r --video {os.path.join('r', 'elite.mp4')}",  # imageio-ffmpeg: test extra
        f"  neuroevo plot r -o {os.path.join('r', 'curves.png')}",
        "  neuroevo resume r --generations 4"]
    from neuroevo.plot import plot_runs  # plot --y: the sparse test-score series

    plot_runs([str(tmp_path / "r")], str(tmp_path / "t.png"), "generations", y=["test_score"])
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    elite = json.loads((tmp_path / "r" / "elite.json").read_text())
    assert elite["score"] == rows[-1]["elite_score"]
    assert isinstance(SeedChain.from_json((tmp_path / "r" / "elite.json").read_text()), SeedChain)
    assert "game: pong" in (tmp_path / "r" / "config.yaml").read_text()

    from neuroevo.policy.nets import build_template
    _, spec = build_template("small", (4, 84, 84), 6)
    from safetensors.torch import load_file
    saved = load_file(tmp_path / "r" / "policy.safetensors")
    assert {k: tuple(v.shape) for k, v in saved.items()} == {e.name: e.shape for e in spec}

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(tmp_path / "r" / "tensorboard"))
    events.Reload()
    logged = [(e.step, e.value) for e in events.Scalars("fitness_max")]
    assert logged == [(r["frames"], pytest.approx(r["fitness_max"])) for r in rows]
    from neuroevo.metrics import CSV_COLUMNS, SCALARS
    assert set(events.Tags()["scalars"]) == {k for k in SCALARS if any(k in r for r in rows)}
    with open(tmp_path / "r" / "metrics.csv") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(CSV_COLUMNS) and len(table) == len(rows)
    for line, row in zip(table, rows, strict=True):  # the CSV says what metrics.jsonl says
        assert {k: float(v) if v else None for k, v in line.items()} == pytest.approx(
            {k: row.get(k) for k in CSV_COLUMNS})

    again = cli("run", "ga", "--game", "pong", "--run-dir", "r", cwd=tmp_path)
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert len((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()) == 2  # untouched

    saved = (tmp_path / "r" / "config.yaml").read_text()  # what ran, not "0 means default"
    assert "truncation: 1\n" in saved and "sigma: 0.002\n" in saved and "name: small\n" in saved
    out = cli("resume", "r", "--generations", "3", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sessions = json.loads((tmp_path / "r" / "run.json").read_text())["sessions"]
    assert [s["from_generation"] for s in sessions] == [0, 2]
    assert sessions[0]["device"] == "cpu" and sessions[0]["kernels"] == "reference, grouped"
    assert all(s["workers"] >= 1 and s["subsets"] >= 1 and s["slots"] >= 1 for s in sessions)


def test_cli_run_from_a_config_file(tmp_path):
    config = pathlib.Path(__file__).parents[2] / "experiments" / "configs" / "quick_cpu_atari.yaml"
    out = cli("run", "ga", "--config", str(config), "--generations", "1", "--set",
              "algo.population=6", "--run-dir", "r", "--device", "cpu", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    saved = (tmp_path / "r" / "config.yaml").read_text()
    assert "game: pong" in saved and "population: 6" in saved and "episode_cap: 100" in saved
    assert len((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["run", "ga", "--game", "brekout"], "unknown Atari game 'brekout'; did you mean 'breakout'?"),
    (["run", "gaa"], "unknown algorithm 'gaa'; did you mean 'ga'?"),
    (["run", "ga", "--net", "huge"], "unknown network 'huge'"),
    (["run", "ga", "--set", "algo.truncaton=3"], "did you mean 'algo.truncation'"),
    (["run", "ga", "--set", "algo.population=lots"], "algo.population must be int, got 'lots'"),
    (["run", "ga", "--population", "0"], "algo.population must be >= 1, got 0"),
    (["run", "ga", "--device", "cuda"], "CUDA is not available; use --device cpu"),
    (["run", "ga", "--config", "nope.yaml"], "cannot read config file nope.yaml"),
    (["run", "es", "--env", "CartPol-v1"], "did you mean 'CartPole-v1'"),
    (["run", "es", "--env", "CartPole-v1", "--net", "small"], "use --net mlp"),
    (["run", "es", "--env", "HalfCheeta-v5"], "did you mean 'HalfCheetah-v5'"),
    (["run", "es", "--env", "Hopper-v5", "--set", "env.obs_norm=maybe"],
     "env.obs_norm must be on, off or auto, got 'maybe'"),
    (["run", "es", "--env", "Hopper-v5", "--set", "env.action_noise=-1"],
     "env.action_noise must be >= 0 (or none: the env's default), got -1.0"),
    (["run", "ga", "--backend", "mpi"], "engine.backend must be local or ray, got 'mpi'"),
    (["run", "ga", "--ray-actors", "-1", "--backend", "ray"], "engine.ray_actors must be >= 0"),
])
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    if "cuda" in args:
        pytest.importorskip("torch")
        import torch
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"neuroevo: error: {out.stderr.strip()[17:]}"]
    assert message in out.stderr and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env, message", [
    ({"NEUROEVO_KERNELS": "fast"}, "NEUROEVO_KERNELS must be auto, triton or reference, got 'fast'"),
    ({"NEUROEVO_CONV": "winograd"}, "NEUROEVO_CONV must be auto, im2col or grouped, got 'winograd'"),
    ({"NEUROEVO_KERNELS": "triton", "TRITON_INTERPRET": "0"},
     "NEUROEVO_KERNELS=triton on a CPU needs Triton's interpreter"),
])
def test_bad_kernel_variables_are_one_line_exit_2_and_write_nothing(tmp_path, env, message):
    pytest.importorskip("triton")
    out = subprocess.run([sys.executable, "-m", "neuroevo", "run", "ga", "--env", "CartPole-v1",
                          "--device", "cpu"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300, env={**os.environ, **env})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"neuroevo: error: {out.stderr.strip()[17:]}"]
    assert message in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_config_defaults_are_quick_cpu_settings():
    cfg = Config()
    assert (cfg.algo.name, cfg.env.game, cfg.net.name, cfg.env.episode_cap) == ("ga", "breakout", "auto", 5000)
    assert cfg.algo.lr is None  # an algorithm's own key: its default (ES: 0.01) on resolve
    override(cfg, "algo.name", "es")
    assert resolve(cfg).algo.lr == 0.01


@pytest.mark.slow
def test_bench_measures_the_run_that_run_builds(tmp_path):
    flags = ["--net", "small", "--population", "4", "--episode-cap", "20", "--device", "cpu",
             "--set", "env.test_episode_cap=20"]
    out = cli("bench", *flags, "--seconds", "0.3", "--rounds", "1", "--json", "b.json",
              "--set", "algo.validation_episodes=2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "b.json").read_text())
    for key in ("sim_only_fps", "inference_only_fps", "naive_fps", "engine_fps", "bound_fps",
                "efficiency", "speedup_vs_naive", "occupancy"):
        assert r[key] > 0 and key in out.stdout.replace("slot occupancy", "occupancy")
    # The independent reference: the config `neuroevo run` writes for the same flags.
    ran = cli("run", "ga", "--game", "breakout", *flags, "--generations", "1",
              "--set", "algo.validation_episodes=2", "--run-dir", "r", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    written = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    for section in ("algo", "env", "net"):
        assert r["run_config"][section] == written[section], section
    assert r["run_config"]["algo"]["truncation"] == 1  # population 4 // 5, at least 1


@pytest.mark.slow
def test_bench_on_a_mujoco_task_measures_es_as_run_builds_it(tmp_path):
    flags = ["--env", "Hopper-v5", "--population", "4", "--episode-cap", "20", "--device",
             "cpu", "--set", "net.hidden=8,8", "--set", "algo.validation_episodes=2"]
    out = cli("bench", *flags, "--seconds", "0.3", "--rounds", "1", "--json", "b.json",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "b.json").read_text())
    for key in ("sim_only_fps", "inference_only_fps", "naive_fps", "engine_fps", "bound_fps",
                "efficiency", "speedup_vs_naive"):
        assert r[key] > 0 and f"{key}" in out.stdout
    assert "Hopper-v5 / mlp 8,8 net" in out.stdout and "steps/s" in out.stdout
    # the stages ran within the passes' wall on each of the drivers
    best = max(r["rounds"], key=lambda x: x["engine_fps"])
    assert 0 < sum(best["stage_seconds"].values()) <= (
        best["engine_seconds"] * r["engine_layout"]["workers"] * 1.01)
    ran = cli("run", "es", *flags, "--generations", "1", "--run-dir", "r", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    written = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    for section in ("algo", "env", "net"):
        assert r["run_config"][section] == written[section], section
    assert written["env"]["obs_norm"] == "on"  # the run's normalisation is what is measured
    session = json.loads((tmp_path / "r" / "run.json").read_text())["sessions"][0]
    assert {k: session[k] for k in ("workers", "subsets", "slots")} == {
        k: r["engine_layout"][k] for k in ("workers", "subsets", "slots")}
    e = r["engine_layout"]
    assert f"{e['workers']} driver thread(s) of {e['subsets']} x {e['slots']} slots" in out.stdout
    bad = cli("bench", "--env", "Hopper-v5", "--set", "algo.name=ga", cwd=tmp_path)
    assert bad.returncode == 2 and "leave env.id, algo.name and engine.backend to those " \
        "flags" in bad.stderr  # the algorithm is --algo's
    pgpe = cli("bench", *flags, "--algo", "pgpe", "--seconds", "0.2", "--rounds", "1",
               "--json", "p.json", cwd=tmp_path)
    assert pgpe.returncode == 0, pgpe.stderr
    assert json.loads((tmp_path / "p.json").read_text())["run_config"]["algo"]["name"] == "pgpe"


def test_cli_plot(tmp_path):
    runs = pathlib.Path(__file__).parents[2] / "experiments" / "learning"
    out = cli("plot", str(runs / "ga-frostbite-small"), str(runs / "ga-breakout-small"),
              "-o", "c.png", "--x", "generations", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "empty").mkdir()
    out = cli("plot", "empty", "-o", "d.png", cwd=tmp_path)
    assert out.returncode == 2 and "cannot read empty/metrics.jsonl" in out.stderr
    assert not (tmp_path / "d.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ga", "es"])
def test_cli_play_scores_and_records_the_saved_policy(tmp_path, algo):
    candidates = [] if algo == "es" else ["--set", "algo.elite_candidates=2"]
    out = cli("run", algo, "--game", "pong", "--population", "6", "--generations", "1",
              "--episode-cap", "40", "--set", "env.test_episode_cap=40", *candidates,
              "--set", "algo.validation_episodes=2", "--run-dir", "r", "--device", "cpu",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    video = "v.gif" if algo == "es" else "v.mp4"
    first = cli("play", "r", "--episodes", "3", "--video", video, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    scores = first.stdout.splitlines()[0].split()[1:]
    assert len(scores) == 3
    # The recorded episode is the first play episode: same seed, same actions, same score.
    assert f"(episode 1, score {scores[0]})" in first.stdout
    header = (tmp_path / video).read_bytes()[:8]
    assert header[:6] == b"GIF89a" if algo == "es" else header[4:8] == b"ftyp"  # MP4 box
    again = cli("play", "r", "--episodes", "3", cwd=tmp_path)
    assert again.stdout.splitlines()[0] == first.stdout.splitlines()[0]  # reproducible
    best = cli("play", "r", "--episodes", "2", "--genome", "best", cwd=tmp_path)
    if algo == "es":
        assert best.returncode == 2 and "keeps no best member" in best.stderr
    else:
        assert best.returncode == 0 and best.stdout.startswith("scores: "), best.stderr
    for args, message in ((["--video", "v.avi"], "--video must name a .gif or .mp4 file"),
                          (["--episodes", "0"], "--episodes must be >= 1, got 0")):
        bad = cli("play", "r", *args, cwd=tmp_path)
        assert bad.returncode == 2 and message in bad.stderr


@pytest.mark.slow
def test_cli_play_records_a_mujoco_policy(tmp_path):
    out = cli("run", "es", "--env", "Hopper-v5", "--population", "4", "--generations", "1",
              "--set", "net.hidden=16,16", "--run-dir", "r", "--device", "cpu", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    first = cli("play", "r", "--episodes", "2", "--video", "hop.mp4", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    scores = first.stdout.splitlines()[0].split()[1:]
    assert f"(episode 1, score {scores[0]})" in first.stdout  # normalised obs, no noise
    assert (tmp_path / "hop.mp4").read_bytes()[4:8] == b"ftyp"
    assert not list(tmp_path.glob("*.tmp*"))
    cart = cli("run", "es", "--env", "CartPole-v1", "--population", "4", "--generations", "1",
               "--run-dir", "c", "--device", "cpu", cwd=tmp_path)
    assert cart.returncode == 0, cart.stderr
    drawn = cli("play", "c", "--video", "c.gif", cwd=tmp_path)  # gymnasium's own renderer
    assert drawn.returncode == 0 and (tmp_path / "c.gif").stat().st_size, drawn.stderr


@pytest.mark.slow
def test_quick_cartpole_config_solves_cartpole(tmp_path):
    config = pathlib.Path(__file__).parents[2] / "experiments" / "configs" / "quick_cpu_cartpole.yaml"
    out = cli("run", "es", "--config", str(config), "--run-dir", "r", "--device", "cpu",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and rows[0]["center_score"] < 500
    assert rows[-1]["center_score"] == 500.0  # the centre balances the pole for 500 steps


@pytest.mark.slow
def test_several_driver_threads_give_the_same_run():
    kw = dict(algo__name="ga", env__game="pong", algo__population=9, env__episode_cap=30,
              env__test_episode_cap=30,
              algo__elite_candidates=2, algo__validation_episodes=2, budget__generations=2,
              engine__device="cpu")
    keys = ("fitness_mean", "fitness_max", "elite_score", "frames", "episodes")
    runs = [train(engine__workers=w, engine__slots=s, **kw).history for w, s in
            ((1, 0), (2, 0), (3, 2))]
    assert [[r[k] for k in keys] for r in runs[0]] == [[r[k] for k in keys] for r in runs[1]]
    assert [[r[k] for k in keys] for r in runs[0]] == [[r[k] for k in keys] for r in runs[2]]


def test_every_cpu_driver_computes_on_one_torch_thread_and_gives_the_caller_its_own_back():
    from neuroevo.build import build
    from neuroevo.config import override

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for workers in (1, 2):
            cfg = Config()
            for key, value in {"env.id": "CartPole-v1", "net.hidden": "8", "algo.name": "es",
                               "algo.population": 8, "engine.workers": workers,
                               "engine.device": "cpu"}.items():
                override(cfg, key, value)
            built = build(cfg)
            seen = set()  # on_episode runs in the driver thread that ran the episode
            evaluate_one(built.evaluator, built.optimizer.ask(),
                         on_episode=lambda *_, s=seen: s.add(torch.get_num_threads()))
            built.evaluator.close()
            assert seen == {1}, workers
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def built_with(sets: dict):
    """What ``neuroevo run`` builds from the quick defaults and these dotted keys."""
    cfg = Config()
    for key, value in sets.items():
        override(cfg, key, value)
    return build(cfg)


def test_closing_a_parallel_evaluator_ends_its_running_evaluation():
    from neuroevo.errors import StateError

    built = built_with({"env.game": "pong", "algo.population": 16, "engine.workers": 2,
                        "env.episode_cap": 200, "engine.device": "cpu"})
    seen = []

    def close_after_the_first(done, total, score, frames):
        seen.append(done)
        if done == 1:  # from another thread, as _train's finally does on Ctrl-C
            threading.Thread(target=built.evaluator.close).start()

    pop = built.optimizer.ask()  # 32 episodes: two a member on Atari
    with pytest.raises(StateError, match="closed during an evaluation"):
        evaluate_one(built.evaluator, pop, on_episode=close_after_the_first)
    assert seen[0] == 1 and len(seen) < len(pop)  # the other episodes were not all played out


def test_the_engine_rate_counts_whole_generations_after_its_warm_up():
    """NSR-ES on the maze: ``warmup`` keeps the first behaviour pass of every centre and
    generation 0 off the clock, and the clock stops where a generation ends, its centre's
    behaviour pass included (every maze episode runs its 400 steps from random weights)."""
    from neuroevo.bench import engine_rate

    built = built_with({"algo.name": "nsres", "env.id": "HardMaze-v0", "algo.population": 6,
                        "algo.centres": 2, "net.hidden": "8", "engine.device": "cpu"})
    try:
        fps, _, _, wall = engine_rate(built, 1e-9, warmup=True)
        assert built.optimizer.state.generation == 2 and built.optimizer.state.phase == "train"
        assert fps * wall == pytest.approx((6 + 1) * 400)  # one generation: 6 members + centre
    finally:
        built.evaluator.close()
