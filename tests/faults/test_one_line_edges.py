"""Edges of the one-line promise: a sweep pointed at a run directory or given a value a run
refuses (before Ray starts, nothing written), paths that cannot exist (too long, a missing
parent, a file on the way: the error names that, and ``make_dirs`` leaves no folders), a
policy file with non-finite or misshapen tensors, and a behaviour function that returns no
numbers."""

import errno
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from faultkit import CARTPOLE, one_line_error
from safetensors import safe_open
from safetensors.torch import load, save

from neuroevo import cli, files
from neuroevo.engine.behaviour import of_final_observation
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.policy.export import POLICY_FIX, load_policy, policy_bytes
from neuroevo.policy.nets import build_template
from neuroevo.policy.obsnorm import ObsNorm

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
SWEEP = ["--set", "env.id=CartPole-v1", "--set", "engine.device=cpu", "--set", "net.hidden=8",
         "--generations", "2"]
# scripts/sweep.py's main in a fresh process, then whether Ray was ever imported there.
PROBE = ("import importlib.util, sys\n"
         "spec = importlib.util.spec_from_file_location('sweep_script', sys.argv[1])\n"
         "module = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(module)\n"
         "code = module.main(sys.argv[2:])\n"
         "print('ray imported' if 'ray' in sys.modules else 'no ray')\n"
         "sys.exit(code)\n")
EVEN = "population_size must be an even number (members come in antithetic pairs), got 9"


def snapshot(root: Path) -> dict:
    """Every entry under ``root``: kind, bytes and modification time."""
    return {str(p.relative_to(root)): (p.is_dir(), p.read_bytes() if p.is_file() else None,
                                       p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def sweep_process(out, *args, cwd):
    return subprocess.run([sys.executable, "-c", PROBE, str(SCRIPT), str(out), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture
def sweep_main():
    """scripts/sweep.py's ``main``, with the signal handlers it installs put back after."""
    spec = importlib.util.spec_from_file_location("sweep_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield module.main
    for s, handler in kept.items():
        signal.signal(s, handler)


# -- sweeps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("keep", ["whole run", "checkpoint only"])
def test_a_sweep_into_a_run_directory_is_refused_before_anything_is_written(tmp_path, one,
                                                                            keep):
    run = tmp_path / "r"
    shutil.copytree(one, run)
    if keep == "checkpoint only":
        os.remove(run / "config.yaml")
    before = snapshot(run)
    out = sweep_process(run, "--algo", "ga", *SWEEP, "--grid", "algo.population=10,12",
                        cwd=tmp_path)
    one_line_error(out, f"sweep: {run} holds a neuroevo run", "give a new directory")
    assert out.stdout.strip().splitlines()[-1] == "no ray"
    assert snapshot(run) == before


def test_a_bad_grid_value_fails_before_ray_starts_and_writes_nothing(tmp_path):
    out = sweep_process(tmp_path / "s", "--algo", "es", *SWEEP, "--grid",
                        "algo.population=8,9", cwd=tmp_path)
    line = one_line_error(out)
    assert line == f"sweep: --grid algo.population=9: {EVEN}"
    assert out.stdout.strip() == "no ray"
    assert not (tmp_path / "s").exists()


GRIDS = [
    # a value of one key, the others at any of their values
    ("es", ["--grid", "algo.sigma=0.01,0.02", "--grid", "algo.population=8,9"],
     f"--grid algo.population=9: {EVEN}"),
    # config checks (build.resolve) as well as the optimizer's
    ("es", ["--grid", "algo.sigma=0.01,-0.5"],
     "--grid algo.sigma=-0.5: algo.sigma must be > 0, got -0.5"),
    # two values that are each fine and refused together
    ("ga", ["--grid", "algo.population=6,40", "--grid", "algo.truncation=5,10"],
     "--grid algo.population=6 with --grid algo.truncation=10: truncation must be an "
     "integer in [1, population_size=6], got 10"),
    # a range's ends
    ("es", ["--random", "2", "--range", "algo.population=int:4:9"],
     f"--range algo.population=int:4:9 (at 9): {EVEN}"),
    ("es", ["--random", "2", "--range", "algo.sigma=lin:-0.1:0.1"],
     "--range algo.sigma=lin:-0.1:0.1 (at -0.1): algo.sigma must be > 0, got -0.1"),
    # the fixed settings alone: no swept value is blamed
    ("es", ["--set", "algo.population=9", "--grid", "algo.sigma=0.01,0.02"], EVEN),
]


@pytest.mark.parametrize("algo,args,message", GRIDS, ids=[" ".join(g[1]) for g in GRIDS])
def test_every_point_of_a_sweep_passes_a_run_s_checks(tmp_path, monkeypatch, capsys,
                                                      sweep_main, algo, args, message):
    monkeypatch.chdir(tmp_path)
    assert sweep_main(["out", "--algo", algo, *SWEEP, *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"sweep: {message}"]
    assert captured.out == "" and not (tmp_path / "out").exists()


def test_a_good_grid_still_passes_the_checks():
    from neuroevo.sweep.space import make_plan, points

    plan = make_plan("es", sets=["env.id=CartPole-v1", "net.hidden=8"],
                     grid=["algo.population=8,10", "algo.sigma=0.01,0.02"], generations=2)
    assert list(points(plan)) == [
        {"algo.population": p, "algo.sigma": s} for p in (8, 10) for s in (0.01, 0.02)]


# -- paths ----------------------------------------------------------------------------------
def _fails(path: str) -> OSError:
    with pytest.raises(OSError) as e:
        files.make_dirs(path)
    return e.value


def test_a_name_over_255_bytes_is_named_and_leaves_nothing(tmp_path):
    name = "x" * 300
    e = _fails(str(tmp_path / name / "r"))
    assert e.errno == errno.ENAMETOOLONG
    text = str(files.storage_error("create", str(tmp_path / name / "r"), e))
    assert "\n" not in text and "free there" not in text
    assert text.endswith(f": File name too long: the name '{'x' * 20}...{'x' * 20}' in it is "
                         "too long (300 bytes; at most 255 here): pick a shorter --run-dir "
                         "or output path")
    assert not any(tmp_path.iterdir())


def test_a_path_over_4096_bytes_is_named_and_make_dirs_leaves_no_folders(tmp_path):
    deep = str(tmp_path / "a") + "".join("/" + "d" * 200 for _ in range(22))
    assert len(deep) > 4096
    e = _fails(deep)
    assert e.errno == errno.ENAMETOOLONG
    assert not any(tmp_path.iterdir())  # os.makedirs leaves ~20 empty folders here
    text = str(files.storage_error("create", deep, e))
    assert text.endswith(f": File name too long: the path is too long ({len(deep)} "
                         "characters; at most 4095 bytes here): pick a shorter --run-dir or "
                         "output path")
    assert "\n" not in text and "free there" not in text and len(text) < 400
    # what make_dirs undoes: os.makedirs, failing the same way, leaves its folders behind
    with pytest.raises(OSError):
        os.makedirs(deep, exist_ok=True)
    assert any(tmp_path.iterdir())


def test_a_path_under_a_regular_file_names_the_file(tmp_path):
    (tmp_path / "f").write_text("keep")
    path = str(tmp_path / "f" / "a" / "b")
    e = _fails(path)
    assert isinstance(e, NotADirectoryError)
    assert str(files.storage_error("create", path, e)) == (
        f"cannot create {path}: Not a directory: {tmp_path}/f on the way is a file, not a "
        "directory: pick another path, or move that file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    assert (tmp_path / "f").read_text() == "keep"


def test_a_missing_parent_is_named(tmp_path):
    path = str(tmp_path / "nope" / "deeper" / "file")
    with pytest.raises(OSError) as e:
        os.open(path, os.O_WRONLY | os.O_CREAT)
    assert str(files.storage_error("write", path, e.value)) == (
        f"cannot write {path}: No such file or directory: its parent directory "
        f"{tmp_path}/nope/deeper does not exist: create it or pick another path")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM,
                                  errno.EROFS, errno.EIO])
def test_disk_and_permission_causes_keep_the_free_space(tmp_path, code):
    text = str(files.storage_error("write", str(tmp_path / "m"), OSError(code,
                                                                          os.strerror(code))))
    assert text.startswith(f"cannot write {tmp_path}/m: {os.strerror(code)} (")
    assert text.endswith(" free there); free space or fix the permissions, then run the "
                         "command again (a run resumes from its last checkpoint)")


def test_make_dirs_is_makedirs_when_it_succeeds(tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "file").write_text("x")
    files.make_dirs(str(tmp_path / "kept" / "a" / "b"))
    files.make_dirs(str(tmp_path / "kept" / "a" / "b"))  # exist_ok
    files.make_dirs(str(tmp_path / "c") + "/")
    assert (tmp_path / "kept" / "a" / "b").is_dir() and (tmp_path / "c").is_dir()
    assert (tmp_path / "kept" / "file").read_text() == "x"
    with pytest.raises(FileExistsError):  # a file where the directory goes
        files.make_dirs(str(tmp_path / "kept" / "file"))


def test_an_over_long_run_dir_is_one_line_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run_dir = str(tmp_path / ("x" * 300) / "r")
    assert cli.main(["run", "ga", *CARTPOLE, "--generations", "1", "--run-dir", run_dir]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("neuroevo: error: cannot "), err
    assert "in it is too long (300 bytes; at most 255 here): pick a shorter --run-dir" in err[0]
    assert not any(tmp_path.iterdir())


# -- load_policy ----------------------------------------------------------------------------
ARCH = {"net": "mlp", "obs_shape": [4], "num_outputs": 2, "hidden": [8], "discrete": True,
        "action_low": None, "action_high": None}


def write_policy(tmp_path, edit=None) -> str:
    """A CartPole MLP policy with an observation normaliser, its tensors changed by
    ``edit(tensors)``."""
    torch.manual_seed(0)
    net, _ = build_template("mlp", (4,), 2, (8,))
    norm = ObsNorm(4)
    norm.update(torch.randn(16, 4))
    path = tmp_path / "policy.safetensors"
    path.write_bytes(policy_bytes(net.state_dict(), ARCH, 3, norm))
    if edit is not None:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata()
        tensors = load(path.read_bytes())
        edit(tensors)
        path.write_bytes(save(tensors, metadata=meta))
    return str(path)


def test_the_untouched_policy_loads_and_acts(tmp_path):
    policy = load_policy(write_policy(tmp_path))
    actions = policy.act(torch.randn(5, 4))
    assert actions.shape == (5,) and set(actions.tolist()) <= {0, 1}


def _set(name, index, value):
    def edit(tensors):
        tensors[name].view(-1)[index] = value
    return edit


NONFINITE = [("hidden.0.weight", 3, float("nan")), ("out.bias", 1, float("inf")),
             ("obs_norm.mean", 0, float("nan")), ("obs_norm.std", 2, float("-inf"))]


@pytest.mark.parametrize("name,index,value", NONFINITE, ids=[f"{n}={v}" for n, _, v in NONFINITE])
def test_a_non_finite_tensor_is_refused(tmp_path, name, index, value):
    path = write_policy(tmp_path, _set(name, index, value))
    with pytest.raises(CheckpointError) as e:
        load_policy(path)
    assert str(e.value) == f"{path} holds NaN or inf in tensor {name!r}; {POLICY_FIX}"


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_an_obs_norm_std_at_or_below_zero_is_refused(tmp_path, value):
    path = write_policy(tmp_path, _set("obs_norm.std", 1, value))
    with pytest.raises(CheckpointError) as e:
        load_policy(path)
    assert str(e.value) == (f"{path} holds a value <= 0 in tensor 'obs_norm.std' (a standard "
                            f"deviation is > 0); {POLICY_FIX}")


def _reshape(tensors):
    tensors["hidden.0.weight"] = torch.zeros(16, 4)
    tensors["hidden.0.bias"] = torch.zeros(16)


SHAPES = [
    ("a differing shape", _reshape,
     "holds tensor 'hidden.0.weight' in shape (16, 4), and its architecture expects (8, 4)"),
    ("a missing tensor", lambda t: t.pop("out.weight"),
     "lacks tensor 'out.weight' (shape (2, 8)) that its architecture needs"),
    ("an unexpected tensor", lambda t: t.update({"extra.weight": torch.zeros(3)}),
     "holds tensor 'extra.weight', which its architecture has no place for"),
    ("a normaliser of another shape", lambda t: t.update({"obs_norm.mean": torch.zeros(5)}),
     "holds tensor 'obs_norm.mean' in shape (5,), and its observations have shape (4,)"),
    ("half a normaliser", lambda t: t.pop("obs_norm.std"),
     "holds obs_norm.mean without the other half of the observation normaliser"),
]


@pytest.mark.parametrize("edit,message", [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_a_misshapen_policy_is_one_line_naming_the_tensor(tmp_path, edit, message):
    path = write_policy(tmp_path, edit)
    with pytest.raises(CheckpointError) as e:
        load_policy(path)
    assert str(e.value) == f"{path} {message}; {POLICY_FIX}"


# -- behaviour functions --------------------------------------------------------------------
def far(obs):
    return "far"


def ragged(obs):
    return [[1.0], [2.0, 3.0]]


def labelled(obs):
    return {"x": 1.0}


@pytest.mark.parametrize("fn,shown", [(far, "str 'far'"),
                                      (ragged, "list [[1.0], [2.0, 3.0]]"),
                                      (labelled, "dict {'x': 1.0}")])
def test_a_behaviour_that_returns_no_numbers_is_a_config_error(fn, shown):
    behaviour = of_final_observation(fn)
    with pytest.raises(ConfigError) as e:
        behaviour(None, np.arange(2), np.zeros((2, 4), np.float32))
    assert str(e.value) == (f"the behaviour function {fn.__name__} returned {shown}, not "
                            "numbers; make it return a 1-D vector of numbers (a list or numpy "
                            "array of floats)")


def test_a_long_returned_value_is_shown_short_on_one_line():
    behaviour = of_final_observation(lambda obs: "line\n" * 40)
    with pytest.raises(ConfigError) as e:
        behaviour(None, np.arange(1), np.zeros((1, 4), np.float32))
    text = str(e.value)
    assert "\n" not in text and "test_a_long_returned_value_is_shown_short_on_one_line." \
        "<locals>.<lambda> returned str 'line\\nline\\n" in text and "...," in text


def test_a_behaviour_returning_a_string_stops_a_novelty_run_with_the_error():
    from neuroevo import train

    with pytest.raises(ConfigError, match=r"^the behaviour function far returned str 'far', "
                                          r"not numbers; make it return a 1-D vector"):
        train(algo__name="nses", env__id="CartPole-v1", algo__population=8,
              env__episode_cap=20, algo__test_episodes=0, engine__device="cpu",
              budget__generations=1, behaviour=far)
