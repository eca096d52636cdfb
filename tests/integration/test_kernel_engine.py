"""Runs through the Triton kernels end to end (on CPU through Triton's interpreter, which
tests/conftest.py turns on; on a GPU machine compiled): the kernel path runs the same episodes
as the reference path, and the engine's layout-independence holds on it."""

import pytest
import torch

from neuroevo import train

pytestmark = pytest.mark.slow  # GA runs through Triton's interpreter

pytest.importorskip("triton")
pytest.importorskip("gymnasium")  # a GPU machine may lack the simulators: see gpu_check.sh
pytest.importorskip("ale_py")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
COMMON = dict(algo__elite_candidates=2, algo__validation_episodes=2, algo__test_episodes=2,
              engine__device=DEVICE, engine__workers=1)
CARTPOLE = dict(env__id="CartPole-v1", net__name="mlp", net__hidden="32,32",
                algo__population=8, budget__generations=2, env__episode_cap=60,
                env__test_episode_cap=60, **COMMON)
PONG = dict(env__game="pong", net__name="small", algo__population=4, budget__generations=1,
            env__episode_cap=6, env__test_episode_cap=6,
            **{**COMMON, "algo__elite_candidates": 1})  # interpreter: slow
KEYS = ("fitness_max", "fitness_mean", "fitness_min", "elite_score", "frames", "episodes",
        "test_score")


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the Triton matmul launches, so a run that silently took the reference path
    cannot pass as a kernel run."""
    from neuroevo.kernels import triton_ops

    calls = []
    real = triton_ops.indexed_matmul
    monkeypatch.setattr(triton_ops, "indexed_matmul",
                        lambda *a, **k: calls.append(a[0].dim()) or real(*a, **k))
    return calls


def history(monkeypatch, kernels: str, kw: dict, **layout):
    monkeypatch.setenv("NEUROEVO_KERNELS", kernels)
    # On a GPU cuDNN's convolutions default to TF32, whose rounding can flip an argmax.
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    rows = train(algo__name="ga", **{**kw, **layout}).history
    return [[r.get(k) for k in KEYS] for r in rows]


@pytest.mark.parametrize("kw", [CARTPOLE, PONG], ids=["cartpole-mlp", "pong-small"])
def test_the_kernel_path_runs_the_reference_s_episodes(monkeypatch, kernel_calls, kw):
    kernel = history(monkeypatch, "triton", kw, engine__subsets=2, engine__slots=3)
    assert 2 in kernel_calls and (3 in kernel_calls) == (kw is PONG)  # dense; im2col convs
    assert kernel[-1][4] > 0
    # Other summation orders, the same argmax actions: the returns are the same numbers.
    calls = len(kernel_calls)
    assert kernel == history(monkeypatch, "reference", kw, engine__subsets=2, engine__slots=3)
    assert len(kernel_calls) == calls


def test_the_kernel_path_is_layout_independent(monkeypatch):
    """Slot counts and subsets change which networks share a forward pass; the kernels
    compute each network on its own, so nothing else changes (the convolutions' share of
    this is tested on the policy: test_kernels.py, batch independence)."""
    runs = [history(monkeypatch, "triton", CARTPOLE, engine__subsets=s, engine__slots=n)
            for s, n in ((2, 3), (1, 8), (3, 1))]
    assert runs[0] == runs[1] == runs[2]
