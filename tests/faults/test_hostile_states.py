"""Crafted checkpoints of every registered algorithm: ``resume``, ``play`` and ``plot
--archive`` either run or exit 2 with one line, and a refusal changes no file of the run
directory (``play`` and ``plot`` never do).

Hypothesis mutates a real checkpoint: a node of its state tree (the optimizer's state above
all, its counters, genomes, archives; the totals, rows, normaliser and identity too) gets
another shape, dtype, value, type or length, loses a key or gains one. The commands run in
this process (``neuroevo.cli.main``), so any exception that escapes them fails the test with
its traceback. The algorithms come from the registry: a new one is covered by registering it
(``SETTINGS`` gives it settings only where the defaults would not run small).

``EXAMPLES`` per algorithm and command in the suite; ``-m fuzz`` runs ``FUZZ_EXAMPLES``.
"""

import contextlib
import dataclasses
import io
import os
import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuroevo import cli
from neuroevo.checkpoint import STATE_FORMAT, state_types
from neuroevo.optim import ALGORITHMS
from neuroevo.serial import load_file, save_file

EXAMPLES, FUZZ_EXAMPLES = 6, 150
SMALL = ["--population", "8", "--device", "cpu", "--set", "net.hidden=8", "--no-progress",
         "--set", "algo.test_episodes=1", "--generations", "1"]
KEYS = {"elite_candidates": "2", "validation_episodes": "1", "centres": "2",
        "grid_low": "0,0", "grid_high": "200,210"}  # small values of the keys an algorithm has
VARIANTS = {"mapelites-cvt": ("mapelites", ["--set", "algo.cvt_cells=12",
                                            "--set", "algo.cvt_samples=600"])}
COMMANDS = ("resume", "play", "plot")


def settings_of(name: str) -> list[str]:
    """A one-generation run of ``name`` that takes a second: the maze for the algorithms
    that read a behaviour, CartPole for the others."""
    algo = ALGORITHMS[name]
    env = "HardMaze-v0" if algo.optimizer.uses_behaviour else "CartPole-v1"
    sets = [f"algo.{k}={v}" for k, v in KEYS.items() if k in algo.config_keys()]
    return ["run", name, "--env", env, *SMALL, *(x for s in sets for x in ("--set", s))]


RUNS = {name: settings_of(name) for name in ALGORITHMS}
RUNS.update({k: [*settings_of(a), *extra] for k, (a, extra) in VARIANTS.items()})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """``pristine(name)``: a finished one-generation run directory of algorithm ``name``."""
    made = {}

    def make(name):
        if name not in made:
            root = tmp_path_factory.mktemp(name)
            assert _quiet(cli.main, [*RUNS[name], "--run-dir", str(root / "r")])[0] == 0
            made[name] = root / "r"
        return made[name]

    return make


def _quiet(fn, *args):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = fn(*args)
    return code, err.getvalue()


def _files(folder) -> dict:
    return {os.path.relpath(os.path.join(d, f), folder): open(os.path.join(d, f), "rb").read()
            for d, _, names in os.walk(folder) for f in names}


# -- the mutations -------------------------------------------------------------------------
def _paths(node, path=(), out=None):
    """Every node of a state tree, as the keys and indices that reach it."""
    out = [] if out is None else out
    out.append(path)
    if isinstance(node, dict):
        for k, v in node.items():
            _paths(v, (*path, k), out)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node[:4]):
            _paths(v, (*path, i), out)
    elif dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            _paths(getattr(node, f.name), (*path, f.name), out)
    return out


DELETE = object()


def _replace(node, path, fn):
    """``node`` with the node at ``path`` replaced by ``fn(it)`` (removed where ``DELETE``)."""
    if not path:
        return fn(node)
    key, rest = path[0], path[1:]
    if isinstance(node, dict):
        new = _replace(node[key], rest, fn)
        out = dict(node)
        if new is DELETE:
            del out[key]
        else:
            out[key] = new
        return out
    if isinstance(node, (list, tuple)):
        items = list(node)
        new = _replace(items[key], rest, fn)
        items[key:key + 1] = [] if new is DELETE else [new]
        return type(node)(items)
    fields = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
    new = _replace(fields[key], rest, fn)
    fields[key] = None if new is DELETE else new
    return type(node)(**fields)


def _tensor_mutations(t: torch.Tensor):
    out = [lambda: t.tolist(), lambda: t.reshape(-1)[:max(t.numel() - 1, 0)],
           lambda: torch.cat([t, t]) if t.ndim else t.reshape(1), lambda: t.unsqueeze(0),
           lambda: t.to(torch.int64), lambda: t.to(torch.float16)]
    if t.is_floating_point() and t.numel():
        for bad in (float("nan"), float("inf"), float("-inf"), -1.0):
            out.append(lambda bad=bad: t.clone().reshape(-1).index_fill(0, torch.tensor(
                [t.numel() // 2]), bad).reshape(t.shape))
    if t.ndim >= 2:
        out.append(lambda: t[:, :-1])
    return out


def _mutations(x):
    """Ways to damage ``x``, each a function of nothing."""
    common = [lambda: DELETE, lambda: None, lambda: "bogus", lambda: [x], lambda: {"x": 1}]
    if isinstance(x, bool):
        return [*common, lambda: 1]
    if isinstance(x, int):
        return [*common, lambda: -7, lambda: 10**9, lambda: 2**63, lambda: 10**30,
                lambda: x + 1, lambda: float(x) + 0.5, lambda: True]
    if isinstance(x, float):
        return [*common, lambda: float("nan"), lambda: float("inf"), lambda: float("-inf"),
                lambda: -1.0, lambda: 10**9]
    if isinstance(x, torch.Tensor):
        return [*common, *_tensor_mutations(x)]
    if isinstance(x, (list, tuple)):
        return [*common, lambda: type(x)(list(x)[:-1]), lambda: type(x)(),
                lambda: type(x)([*x, *x]), lambda: list(x) if isinstance(x, tuple) else tuple(x),
                lambda: type(x)([*x, None])]
    if isinstance(x, dict):
        out = [*common, lambda: {**x, "bogus": 1}, lambda: list(x.values())]
        if x and all(isinstance(k, int) for k in x):
            out += [lambda key=key: {**x, key: next(iter(x.values()))} for key in (-7, 10**9)]
            out.append(lambda: dict(list(x.items())[:-1]))
        return out
    if dataclasses.is_dataclass(x):
        return [*common, lambda: {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}]
    return [*common, lambda: 0, lambda: torch.zeros(3)]


@st.composite
def damaged(draw, tree):
    """``tree`` with one node damaged; two in three land in the optimizer's own state."""
    paths = [p for p in _paths(tree) if p]
    inner = [p for p in paths if p[:2] == ("optimizer", "state") and len(p) > 2]
    path = draw(st.sampled_from(inner if inner and draw(st.integers(0, 2)) else paths))
    node = tree
    for key in path:
        node = getattr(node, key) if dataclasses.is_dataclass(node) else node[key]
    make = draw(st.sampled_from(_mutations(node)))
    return path, _replace(tree, path, lambda _: make())


# -- the property --------------------------------------------------------------------------
def _command(name: str, command: str, run: str, out: str) -> list[str]:
    if command == "resume":
        return ["resume", run, "--no-progress"]
    if command == "play":
        return ["play", run, "--episodes", "1"]
    return ["plot", run, "--archive", "-o", out]


def check_damaged_runs(name, command, pristine, tmp_path, data):
    source = pristine(name)
    _, tree = load_file(str(source / "checkpoint" / "state.safetensors"), state_types(),
                        STATE_FORMAT)
    path, bad = data.draw(damaged(tree))
    run = tmp_path / "r"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(source, run)
    save_file(str(run / "checkpoint" / "state.safetensors"), bad, meta={"format": STATE_FORMAT})
    before = _files(run)
    code, err = _quiet(cli.main, _command(name, command, str(run), str(tmp_path / "a.png")))
    lines = err.strip().splitlines()
    assert code in (0, 2), (path, code, err)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("neuroevo: error: "), (path, err)
    if code == 2 or command != "resume":
        assert _files(run) == before, (path, command, "changed the run directory")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(RUNS))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_checkpoint_runs_or_is_one_line(name, command, pristine, tmp_path, data):
    check_damaged_runs(name, command, pristine, tmp_path, data)


@pytest.mark.fuzz
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(RUNS))
@settings(max_examples=FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_many_damaged_checkpoints_run_or_are_one_line(name, command, pristine, tmp_path, data):
    check_damaged_runs(name, command, pristine, tmp_path, data)
