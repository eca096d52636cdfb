"""The bench's reported figures, worked by hand from made-up rounds."""

import pytest

from neuroevo.bench import figures


def test_best_rounds_and_the_bound_by_hand():
    rounds = [
        {"sim_only_fps": 3000.0, "inference_only_fps": 5000.0, "naive_fps": 100.0,
         "engine_fps": 1500.0, "occupancy": 0.5, "stage_seconds": {"forward": 1.0}},
        {"sim_only_fps": 2000.0, "inference_only_fps": 6000.0, "naive_fps": 125.0,
         "engine_fps": 1800.0, "occupancy": 0.75, "stage_seconds": {"forward": 2.0}},
    ]
    cpu = figures(rounds, on_gpu=False)
    # best of each: sim 3000 (round 1), inference 6000 and naive 125 (round 2)
    assert (cpu["sim_only_fps"], cpu["inference_only_fps"], cpu["naive_fps"]) == (3000, 6000, 125)
    # sharing the cores: 1 / (1/3000 + 1/6000) = 6000 * 3000 / 9000 = 2000 frames/s
    assert cpu["bound_fps"] == pytest.approx(2000.0)
    assert cpu["efficiency"] == pytest.approx(0.9)  # 1800 / 2000
    assert cpu["speedup_vs_naive"] == pytest.approx(14.4)  # 1800 / 125
    # stages and occupancy come from the best engine round, not the best of each
    assert (cpu["occupancy"], cpu["stage_seconds"]) == (0.75, {"forward": 2.0})
    gpu = figures(rounds, on_gpu=True)
    assert gpu["bound_fps"] == 3000.0 and gpu["efficiency"] == pytest.approx(0.6)
