"""Virtual batch normalisation against a plain torch reference: the small net built from
``nn.Conv2d`` / ``nn.Linear`` and ``nn.BatchNorm`` layers, its statistics those of the
reference batch (torch's own batch norm in training mode), then frozen (eval mode)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from neuroevo.policy.batched import BatchedPolicy, SlotParams
from neuroevo.policy.export import load_policy, policy_bytes
from neuroevo.policy.nets import build_template
from neuroevo.policy.vbn import moments

ACTIONS = 6


def reference_net(weights: dict[str, torch.Tensor], batch: torch.Tensor) -> nn.Module:
    """The A3C small net with batch norm after each hidden layer (affine weight 1, bias =
    the genome's bias, eps 1e-3), statistics from ``batch``, frozen."""
    def norm(cls, bias):
        bn = cls(len(bias), eps=1e-3, momentum=None)  # momentum None: the batch's own moments
        bn.weight.data.fill_(1.0)
        bn.bias.data.copy_(bias)
        return bn

    conv1 = nn.Conv2d(4, 16, 8, 4, bias=False)
    conv2 = nn.Conv2d(16, 32, 4, 2, bias=False)
    fc = nn.Linear(32 * 11 * 11, 256, bias=False)
    out = nn.Linear(256, ACTIONS)
    conv1.weight.data.copy_(weights["convs.0.weight"])
    conv2.weight.data.copy_(weights["convs.1.weight"])
    fc.weight.data.copy_(weights["fc.weight"])
    out.weight.data.copy_(weights["out.weight"])
    out.bias.data.copy_(weights["out.bias"])
    norms = [norm(nn.BatchNorm2d, weights["convs.0.bias"]),
             norm(nn.BatchNorm2d, weights["convs.1.bias"]),
             norm(nn.BatchNorm1d, weights["fc.bias"])]
    net = nn.Sequential(  # TensorFlow's SAME padding, worked out for 84 -> 21 -> 11
        nn.ZeroPad2d((2, 2, 2, 2)), conv1, norms[0], nn.ReLU(),
        nn.ZeroPad2d((1, 2, 1, 2)), conv2, norms[1], nn.ReLU(),
        nn.Flatten(), fc, norms[2], nn.ReLU(), out)
    net.train()
    with torch.no_grad():
        net(batch.float() / 255.0)
    for bn, n in zip(norms, (128 * 21 * 21, 128 * 11 * 11, 128), strict=True):
        bn.running_var.mul_((n - 1) / n)  # torch keeps the unbiased variance; VBN the biased
    return net.eval()


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    template, spec = build_template("small", (4, 84, 84), ACTIONS, vbn=True)
    g = torch.Generator().manual_seed(1)
    batch = torch.randint(0, 256, (128, 4, 84, 84), dtype=torch.uint8, generator=g)
    params = torch.randn(5, spec.num_params, generator=g) * spec.init_std()
    for e in spec:  # biases too, so that the order of bias and normalisation is tested
        if e.name.endswith("bias"):
            params[:, e.slice] = 0.3 * torch.randn(5, e.numel, generator=g)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8, generator=g)
    return BatchedPolicy(template, spec, reference_batch=batch), params, obs


def expected(policy, params, obs) -> torch.Tensor:
    return torch.stack([reference_net(policy.spec.unflatten(p), policy.reference_batch)(
        o[None].float() / 255.0)[0] for p, o in zip(params, obs, strict=True)]).detach()


def test_slot_forward_equals_the_batchnorm_reference_in_any_rows(setup):
    policy, params, obs = setup
    want = expected(policy, params, obs)
    for order in ([0, 1, 2, 3, 4], [4, 2, 0, 3, 1]):
        slots = SlotParams(policy.spec, 7)
        for row, member in enumerate(order):
            slots.load(row, params[member])
            policy.prepare(slots.layers, row)
        got = policy.forward(slots.prefix(5), obs[order])
        torch.testing.assert_close(got, want[order], rtol=1e-4, atol=1e-4)
    # an idle slot moved into a freed row keeps its member's normalisation
    slots.move(4, 0)
    torch.testing.assert_close(policy.forward(slots.prefix(1), obs[[1]]), want[[1]],
                               rtol=1e-4, atol=1e-4)


def test_the_definitions_agree(setup):
    """``BatchedPolicy.reference`` (the template's VBN path, per network), ``__call__`` (the
    fast path on flat parameters, which it leaves untouched) and the reference net."""
    policy, params, obs = setup
    want = expected(policy, params, obs)
    before = params.clone()
    torch.testing.assert_close(policy.reference(params, obs), want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(policy(params, obs), want, rtol=1e-4, atol=1e-4)
    assert torch.equal(params, before)


def test_the_normalisation_is_real(setup):
    """The reference batch decides the outputs: another batch gives other actions' logits,
    and the moments are those of the batch (hidden pre-activations centred on it)."""
    policy, params, obs = setup
    other = BatchedPolicy(policy.template, policy.spec,
                          reference_batch=policy.reference_batch // 2)
    assert not torch.allclose(policy(params, obs), other(params, obs), atol=1e-3)
    weights = policy.spec.unflatten(params[0])
    (mean, inv), *_ = moments(policy.template, weights, policy.reference_batch)
    y = F.conv2d(F.pad(policy.reference_batch.float() / 255.0, (2, 2, 2, 2)),
                 weights["convs.0.weight"], stride=4)
    torch.testing.assert_close(mean, y.mean((0, 2, 3)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(inv, 1 / torch.sqrt(y.var((0, 2, 3), unbiased=False) + 1e-3),
                               rtol=1e-5, atol=1e-5)


def test_an_exported_vbn_policy_carries_its_reference_batch(setup, tmp_path):
    policy, params, obs = setup
    arch = {"net": "small", "obs_shape": [4, 84, 84], "num_outputs": ACTIONS, "hidden": [],
            "discrete": True, "action_low": None, "action_high": None, "vbn": True}
    path = tmp_path / "policy.safetensors"
    path.write_bytes(policy_bytes(policy.spec.unflatten(params[2]), arch, 0,
                                  reference_batch=policy.reference_batch))
    loaded = load_policy(str(path))
    torch.testing.assert_close(loaded(obs[[2]]), expected(policy, params, obs)[[2]],
                               rtol=1e-4, atol=1e-4)


def test_random_play_reference_batch_is_seeded():
    from neuroevo.config import EnvConfig
    from neuroevo.envs.base import random_play
    from neuroevo.envs.spec import env_spec

    env = env_spec(EnvConfig(game="breakout"))
    batches = []
    for seed in (3, 3, 4):
        pool = env.make_pool(2, 1)
        batches.append(random_play(pool, env.action.n, seed, 40))
        pool.close()
    assert batches[0].shape == (40, 4, 84, 84) and batches[0].dtype == np.uint8
    assert np.array_equal(batches[0], batches[1])
    assert not np.array_equal(batches[0], batches[2])
    assert batches[0][-1].any() and not np.array_equal(batches[0][0], batches[0][-1])
