"""Observation statistics: sums per member, merged in member order whatever the layout."""

import numpy as np
import torch

from neuroevo.engine import obsstats
from neuroevo.policy.obsnorm import ObsNorm


def test_merge_gives_the_plain_sums_in_any_insertion_order():
    rng = np.random.default_rng(0)
    episodes = {m: rng.normal(size=(int(rng.integers(1, 6)), 3)).astype(np.float32)
                for m in range(7)}
    one, two = {}, {}
    for m in range(7):  # one worker, members in order
        for x in episodes[m]:
            obsstats.add(one, m, x)
    for m in (5, 1, 6, 0, 3, 2, 4):  # two workers' results united in another order
        for x in episodes[m]:
            obsstats.add(two, m, x)
    a, b = ObsNorm((3,)), ObsNorm((3,))
    obsstats.merge(a, one)
    obsstats.merge(b, two)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.std, b.std)
    every = np.concatenate([episodes[m] for m in range(7)]).astype(np.float64)
    # ObsNorm starts from a prior count of eps = 1e-2 (the paper's running statistics)
    np.testing.assert_allclose(a.mean.numpy(), every.sum(0) / (len(every) + 1e-2), rtol=1e-9)
    assert one[3][2] == len(episodes[3])  # the count of member 3's observations
