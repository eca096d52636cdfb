import numpy as np
import pytest
import torch

from neuroevo.errors import ConfigError
from neuroevo.policy.obsnorm import ObsNorm


def reference(batches, eps=1e-2, var_floor=1e-2):
    """es_distributed's RunningStat, written out in numpy float64."""
    s, ssq, n = 0.0, eps, eps
    for b in batches:
        s, ssq, n = s + b.sum(0), ssq + (b**2).sum(0), n + len(b)
    mean = s / n
    return mean, np.sqrt(np.maximum(ssq / n - mean**2, var_floor))


def test_matches_reference_and_merges_worker_stats():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(50, 4)) for _ in range(3)]
    batches.append(np.full((20, 4), 1.0))  # low-variance data stresses the floor path
    whole, merged = ObsNorm(4), ObsNorm(4)
    for b in batches:
        whole.update(torch.from_numpy(b))
        merged.increment(*ObsNorm.stats(torch.from_numpy(b)))
    mean, std = reference(batches)
    assert np.allclose(whole.mean.numpy(), mean) and np.allclose(whole.std.numpy(), std)
    assert torch.equal(whole.sum, merged.sum) and whole.count == merged.count


def test_variance_floor_and_clip():
    n = ObsNorm(2)
    n.update(torch.full((100, 2), 4.0))
    assert torch.allclose(n.std, torch.full((2,), 0.1, dtype=torch.float64))
    out = n(torch.tensor([[4.0, 100.0]]))
    assert out.dtype == torch.float32
    assert out[0, 1].item() == 5.0
    # abs tolerance: float32 cancellation in obs - mean
    assert out[0, 0].item() == pytest.approx((4.0 - 400 / 100.01) / 0.1, abs=1e-5)


def test_state_dict_round_trip_and_shape_errors():
    n = ObsNorm((2, 3))
    n.update(torch.randn(10, 2, 3))
    m = ObsNorm((2, 3))
    m.load_state_dict(n.state_dict())
    assert torch.equal(m.mean, n.mean) and torch.equal(m.std, n.std)
    with pytest.raises(ConfigError, match=r"shape \(2, 3\)"):
        n.update(torch.randn(10, 3))
