"""Every bad input: one line naming the problem and the fix, exit 2, no traceback, nothing
written. Driven through ``neuroevo.cli.main`` in this process (a few through a subprocess, for
the real exit status)."""

import pytest
from faultkit import CARTPOLE, neuroevo, one_line_error

from neuroevo import cli

RUN = ["run", "ga", *CARTPOLE, "--generations", "1"]
CASES = [
    # keys the chosen algorithm or env does not use
    (["run", "rs", *CARTPOLE, "--set", "algo.sigma=0.1"], "algo.sigma is set but not used"),
    (["run", "rs", *CARTPOLE, "--set", "algo.truncation=3"], "algo.truncation is set but not"),
    (["run", "es", *CARTPOLE, "--set", "algo.truncation=3"], "the es algorithm does not use"),
    (["run", "ga", *CARTPOLE, "--set", "algo.lr=0.1"], "algo.lr is set but not used"),
    ([*RUN, "--set", "env.noop_max=5"], "env.noop_max is set but not used"),
    ([*RUN, "--set", "env.frameskip=2"], "it configures Atari games"),
    ([*RUN, "--set", "env.fire_on_life_loss=true"],
     "env.fire_on_life_loss is set but not used: it configures Atari games"),
    (["run", "ga", "--game", "pong", "--set", "env.fire_on_life_loss=yes"],
     "env.fire_on_life_loss must be true or false, got 'yes'"),
    (["run", "ga", "--game", "pong", "--set", "env.fire_on_life_loss=1"],
     "env.fire_on_life_loss must be true or false"),
    ([*RUN, "--set", "env.fire_on_frozen_screen=10"],
     "env.fire_on_frozen_screen is set but not used: it configures Atari games"),
    (["run", "ga", "--game", "pong", "--set", "env.fire_on_frozen_screen=-1"],
     "env.fire_on_frozen_screen must be >= 0 agent steps"),
    (["run", "ga", "--game", "pong", "--set", "env.fire_on_frozen_screen=2.5"],
     "env.fire_on_frozen_screen must be int, got '2.5'"),
    (["run", "ga", "--game", "pong", "--set", "env.action_noise=0.1"], "discrete"),
    # behaviour characterisations
    (["run", "es", "--env", "Walker2d-v5", "--set", "env.behaviour=feet_contact"],
     "env.behaviour is set but not used: the es algorithm reads no behaviour"),
    (["run", "mapelites", "--env", "Swimmer-v5", "--set", "env.behaviour=feet_contact",
      "--set", "algo.grid_low=0,0", "--set", "algo.grid_high=1,1"],
     "env.behaviour=feet_contact measures the feet of the MuJoCo tasks"),
    (["run", "nses", "--game", "pong", "--set", "env.behaviour=feet_contact"],
     "not the Atari game 'pong'; use env.behaviour=auto"),
    (["run", "nses", "--env", "Hopper-v5", "--set", "env.behaviour=feet"],
     "env.behaviour must be auto, feet_contact or ram, got 'feet'"),
    (["run", "ga", "--game", "pong", "--net", "large", "--set", "net.hidden=8"], "net.hidden"),
    ([*RUN, "--ray-actors", "2"], "only with --backend ray"),
    ([*RUN, "--ray-address", "auto"], "engine.ray_address is set but not used"),
    # budgets and caps
    ([*RUN[:-2], "--generations", "-1"], "budget.generations must be >= 0"),
    ([*RUN, "--frames", "-5"], "budget.frames must be >= 0"),
    ([*RUN, "--episode-cap", "-1"], "env.episode_cap must be >= 0 (0: no cap"),
    (["resume", "r", "--generations", "-2"], "--generations must be >= 0"),
    # the test score
    ([*RUN, "--set", "algo.test_episodes=-1"], "algo.test_episodes must be >= 0"),
    ([*RUN, "--set", "algo.test_every=0"], "algo.test_every must be >= 1 (generations)"),
    ([*RUN, "--set", "env.test_episode_cap=-3"], "env.test_episode_cap must be >= 0"),
    (["play", "r", "--episode-cap", "0"], "--episode-cap must be >= 1"),
    # virtual batch normalisation: image nets only, and a real boolean
    ([*RUN, "--set", "net.vbn=true"], "net.vbn is set but not used: virtual batch"),
    (["run", "es", "--game", "pong", "--set", "net.vbn=yes"], "net.vbn must be true or false"),
    (["plot", "r", "-o", "x.png", "--y", "test_scor"], "unknown metric 'test_scor'"),
    # floats: inf and nan, anywhere
    ([*RUN, "--set", "algo.sigma=nan"], "algo.sigma must be a finite number"),
    ([*RUN, "--set", "algo.sigma=inf"], "finite"),
    (["run", "es", *CARTPOLE, "--set", "algo.lr=-inf"], "finite"),
    ([*RUN, "--set", "env.obs_stats_fraction=NaN"], "finite"),
    # ranges
    ([*RUN, "--population", "0"], "algo.population must be >= 1"),
    ([*RUN, "--seed", "-1"], "seed must be >= 0"),
    ([*RUN, "--set", "env.sticky_actions=1.5"], "env.sticky_actions must be in [0, 1]"),
    ([*RUN, "--set", "engine.workers=-1"], "engine.workers must be >= 0"),
    ([*RUN, "--set", "env.obs_norm=maybe"], "env.obs_norm must be on, off or auto"),
    ([*RUN, "--backend", "spark"], "engine.backend must be local or ray"),
    # devices
    ([*RUN, "--device", "mps"], "engine.device must be auto, cpu, cuda or cuda:N"),
    ([*RUN, "--device", "cuda:x"], "engine.device must be"),
    ([*RUN, "--device", "cuda:7"], "cuda:7"),
    # Ray addresses: malformed, or nothing listening there
    ([*RUN, "--backend", "ray", "--ray-address", "garbage"],
     "engine.ray_address must be auto, HOST:PORT or ray://HOST:PORT"),
    ([*RUN, "--backend", "ray", "--ray-address", "127.0.0.1:1"],
     "cannot reach the Ray cluster at 127.0.0.1:1"),
    ([*RUN, "--backend", "ray", "--set", "engine.ray_timeout=0"], "engine.ray_timeout must be"),
    # a slot layout that cannot fit memory: refused before allocating
    ([*RUN, "--set", "engine.slots=100000000"], "the slot layout needs"),
    # bench, plot
    (["bench", "--seconds", "0"], "--seconds must be > 0"),
    (["bench", "--rounds", "0"], "--rounds must be >= 1"),
    (["bench", "--workers", "-1"], "--workers must be >= 0"),
    (["bench", "--net", "mlp"], "unknown network for an Atari bench"),
    (["bench", "--json", "nowhere/b.json"], "its directory does not exist"),
    (["plot", "r", "-o", "x.xyz"], "the image must end in .png, .pdf, .svg"),
    # env ids and games that cannot run here (issue 36)
    (["run", "ga", "--env", "Breakout-v4"], "Breakout-v4 skips a random 2 to 4 frames per step"),
    (["run", "ga", "--env", "ALE/Breakout-v5", "--set", "env.frameskip=2"],
     "env.frameskip=2 conflicts with env.id='ALE/Breakout-v5', which means 4"),
    (["run", "ga", "--env", "Hopper-v3"], "Hopper-v3 is a gymnasium placeholder for an env of "
                                          "mujoco-py (use the v5 id)"),
    (["run", "ga", "--env", "GymV21Environment-v0"], "placeholder for an env of the old gym"),
    (["run", "ga", "--game", "combat"], "'combat' has no single-player mode in ale-py"),
    # config files
    (["run", "ga", "--config", "missing.yaml"], "cannot read config file missing.yaml"),
    (["run", "ga", "--set", "algo.populaton=3"], "did you mean 'algo.population'"),
    (["run", "ga", "--set", "seed"], "--set takes key=value"),
]
CONFIGS = [("algo:\n  population: yes\n", "algo.population must be int, got 'yes'"),
           ("algo:\n  population: true\n", "got the boolean True"),
           ("algo:\n  sigma: .nan\n", "algo.sigma must be a finite number"),
           ("env:\n  episode_cap: -3\n", "env.episode_cap must be >= 0"),
           ("- a list\n", "must be a mapping"),
           ("algo: [1, 2\n", "is not valid YAML")]


def _run_main(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(c[0][:1] + c[0][-2:])
                                                     for c in CASES])
def test_bad_command_lines(tmp_path, monkeypatch, capsys, argv, needle):
    code, err = _run_main(argv, tmp_path, monkeypatch, capsys)
    assert code == 2 and len(err) == 1 and needle in err[0], (code, err)
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("text,needle", CONFIGS)
def test_bad_config_files(tmp_path, monkeypatch, capsys, text, needle):
    (tmp_path / "c.yaml").write_text(text)
    code, err = _run_main(["run", "ga", "--config", "c.yaml"], tmp_path, monkeypatch, capsys)
    assert code == 2 and len(err) == 1 and needle in err[0], (code, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_yaml_on_and_off_are_names_not_booleans(tmp_path):
    from neuroevo.config import load

    (tmp_path / "c.yaml").write_text("env:\n  obs_norm: on\n  id: CartPole-v1\n")
    assert load(str(tmp_path / "c.yaml")).env.obs_norm == "on"
    (tmp_path / "c.yaml").write_text("env:\n  obs_norm: off\n")
    assert load(str(tmp_path / "c.yaml")).env.obs_norm == "off"


@pytest.mark.slow
def test_episode_cap_0_means_the_envs_own_limit(tmp_path):
    out = neuroevo("run", "ga", *CARTPOLE, "--generations", "1", "--episode-cap", "0",
                   "--run-dir", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    capped = neuroevo("run", "ga", *CARTPOLE, "--generations", "1", "--episode-cap", "20",
                      "--run-dir", "c", cwd=tmp_path)
    import json
    full = json.loads((tmp_path / "r" / "metrics.jsonl").read_text())
    short = json.loads((tmp_path / "c" / "metrics.jsonl").read_text())
    assert capped.returncode == 0 and short["fitness_max"] <= 20 < full["fitness_max"] <= 500


def test_a_bad_input_through_a_real_process_is_exit_2(tmp_path):
    one_line_error(neuroevo(*RUN, "--set", "algo.sigma=inf", cwd=tmp_path), "finite")
    assert not any(tmp_path.iterdir())


def _sweep_main():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
    spec = importlib.util.spec_from_file_location("sweep_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


SWEEP = ["out", "--algo", "es", "--set", "env.id=CartPole-v1", "--set", "net.hidden=8",
         "--generations", "2"]
SWEEPS = [
    ([*SWEEP, "--range", "algo.sigma=log:0.01:0.1"], "--range goes with --random N"),
    ([*SWEEP, "--random", "0", "--range", "algo.sigma=log:0.01:0.1"], "number of points, >= 1"),
    ([*SWEEP, "--grid", "algo.sigma=0.1", "--seeds", "0,1,0"], "--seeds takes distinct"),
    ([*SWEEP, "--grid", "algo.sigma=0.1,0.2", "--scheduler", "pbt"], "perturbs the --range"),
    ([*SWEEP, "--grid", "algo.sigma=0.1", "--metric", "centre_score"],
     "unknown metric 'centre_score'; did you mean 'center_score'"),
    ([*SWEEP, "--random", "2", "--range", "algo.sigma=log:0.01:0.1", "--search", "optuna"],
     "--random N is --search random --samples N"),
]


@pytest.mark.parametrize("argv,needle", SWEEPS, ids=[" ".join(c[0][-2:]) for c in SWEEPS])
def test_bad_sweeps(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    assert _sweep_main()(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("sweep: "), lines
    assert not (tmp_path / "out").exists()  # nothing written
