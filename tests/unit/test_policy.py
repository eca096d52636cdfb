import math

import pytest
import torch
from torch.func import functional_call

from neuroevo import GA, NoiseTable
from neuroevo.errors import UnknownName
from neuroevo.policy.batched import BatchedPolicy, SlotParams
from neuroevo.policy.nets import build_template

NETS = [("large", (4, 84, 84), 18), ("small", (4, 84, 84), 18), ("mlp", (17,), 6)]


def population(spec, n, seed=0):
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=n, truncation=2, elite_candidates=0,
            seed=seed, noise=NoiseTable.shared(size=1 << 25))
    return ga.ask().params()


def observations(shape, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    if len(shape) == 3:
        return torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=g)
    return torch.randn(n, *shape, generator=g)


def test_deep_ga_parameter_counts_and_same_padding():
    large, spec = build_template("large", (4, 84, 84), 18)
    assert spec.num_params == 4_052_658  # Such et al. 2017, Nature-DQN layout, SAME padding
    assert large.fc.in_features == 11 * 11 * 64
    _, small = build_template("small", (4, 84, 84), 18)
    assert small.num_params == 1_008_450
    _, mlp = build_template("mlp", (17,), 6, hidden=(64, 64))
    assert mlp.num_params == 17 * 64 + 64 + 64 * 64 + 64 + 64 * 6 + 6


def test_init_stds_are_fan_in_scaled_with_a_small_output_layer():
    _, spec = build_template("large", (4, 84, 84), 18)
    assert spec["convs.0.weight"].init_std == pytest.approx(1 / math.sqrt(4 * 8 * 8))
    assert spec["fc.weight"].init_std == pytest.approx(1 / math.sqrt(7744))
    assert spec["out.weight"].init_std == pytest.approx(0.1 / math.sqrt(512))
    assert all(e.init_std == 0.0 for e in spec if e.name.endswith("bias"))
    std = spec.init_std()
    assert std.shape == (spec.num_params,) and std[spec["fc.bias"].slice].eq(0).all()


@pytest.mark.parametrize("net, obs_shape, actions", NETS)
def test_batched_forward_equals_per_network_forward(net, obs_shape, actions):
    template, spec = build_template(net, obs_shape, actions)
    policy = BatchedPolicy(template, spec)
    params, obs = population(spec, 6), observations(obs_shape, 6)
    naive = torch.stack([functional_call(template, spec.unflatten(params[i]), (obs[i : i + 1],))[0]
                         for i in range(6)])
    scale = naive.abs().max()
    assert torch.allclose(policy.reference(params, obs), naive, atol=1e-5 * scale, rtol=0)
    assert torch.allclose(policy(params, obs), naive, atol=1e-5 * scale, rtol=0)
    slots = SlotParams(spec, 6)
    for i in range(6):
        slots.load(i, params[i])
    assert torch.allclose(policy.forward(slots.prefix(6), obs), naive, atol=1e-5 * scale, rtol=0)


@pytest.mark.parametrize("net, obs_shape, actions", NETS)
def test_outputs_do_not_depend_on_which_other_slots_are_active(net, obs_shape, actions):
    # Bit-for-bit: an argmax action must not flip because a neighbour's episode ended.
    template, spec = build_template(net, obs_shape, actions)
    policy, n = BatchedPolicy(template, spec), 12
    params, obs = population(spec, n, seed=1), observations(obs_shape, n, seed=1)
    slots = SlotParams(spec, n)
    for i in range(n):
        slots.load(i, params[i])
    full = policy.forward(slots.prefix(n), obs)
    for members in ([0], [5], [11], [2, 3], [9, 0, 4], list(range(n - 1, 0, -1))):
        # Load these members into rows [0, k), as the evaluator does after moves.
        for row, m in enumerate(members):
            slots.load(row, params[m])
        out = policy.forward(slots.prefix(len(members)), obs[members])
        assert torch.equal(out, full[members]), members
        for row in range(n):
            slots.load(row, params[row])
    slots.move(7, 0)
    assert torch.equal(policy.forward(slots.prefix(1), obs[[7]]), full[[7]])


def test_unknown_network_suggests_close_names():
    with pytest.raises(UnknownName, match=r"unknown network 'larg'; did you mean 'large'"):
        build_template("larg", (4, 84, 84), 18)
