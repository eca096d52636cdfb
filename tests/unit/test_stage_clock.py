"""Stage timers: host intervals per stage on a CPU; CUDA events on a GPU (gpu_check.sh)."""

import time

import pytest
import torch

from neuroevo.engine.timing import STAGES, StageClock
from neuroevo.evaluation import evaluate_one


def test_a_cpu_clock_adds_host_intervals_per_stage():
    clock = StageClock(torch.device("cpu"))
    clock.add("forward", 1.0, 1.5)
    clock.add("forward", 2.0, 2.25)
    clock.add("env_wait", 0.0, 3.0)
    start = clock.mark()
    assert isinstance(start, float) and start <= time.perf_counter()
    totals = clock.totals()
    assert set(totals) == set(STAGES)
    assert totals["forward"] == 0.75 and totals["env_wait"] == 3.0 and totals["d2h"] == 0.0


def test_an_evaluations_stages_fit_in_its_wall_time():
    """The driver thread's stages are disjoint intervals of the evaluation: their sum can
    never exceed its wall time."""
    from neuroevo.build import build
    from neuroevo.config import Config, override

    cfg = Config()
    for key, value in {"env.id": "CartPole-v1", "net.hidden": "8", "algo.population": 8,
                       "engine.device": "cpu", "engine.workers": 1}.items():
        override(cfg, key, value)
    built = build(cfg)
    try:
        r = evaluate_one(built.evaluator, built.optimizer.ask())
    finally:
        built.evaluator.close()
    assert set(r.timings) == set(STAGES)
    assert 0 < sum(r.timings.values()) <= r.wall_time
    assert r.timings["forward"] > 0 and r.timings["env_wait"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_clock_reads_every_event_it_recorded():
    clock = StageClock(torch.device("cuda"))
    x = torch.randn(2048, 2048, device="cuda")
    for _ in range(300):  # past the 256 pending events read along the way
        start = clock.mark()
        x = torch.tanh(x @ x)
        clock.add("forward", start, clock.mark())
    totals = clock.totals()
    assert totals["forward"] > 0 and not clock._pending
