"""The Triton kernels, run on CPU through Triton's interpreter, against their references."""

import importlib

import pytest
import torch

from neuroevo import NoiseTable, SeedChain
from neuroevo.genomes import ChainDecoder, Perturbation, PerturbationDecoder
from neuroevo.kernels import backend, reference

pytest.importorskip("triton")


@pytest.fixture
def ops(monkeypatch):
    """``neuroevo.kernels`` with the Triton path on CPU tensors (the interpreter, which
    tests/conftest.py turns on before anything imports triton)."""
    monkeypatch.setenv("NEUROEVO_KERNELS", "triton")
    import neuroevo.kernels as kernels
    import neuroevo.kernels.triton_ops as triton_ops

    assert type(triton_ops._gemv).__name__ == "InterpretedFunction", \
        "triton was imported before TRITON_INTERPRET was set"
    assert backend(torch.zeros(1)) == "triton"
    return kernels


CASES = [  # (N rows, M stored networks, L positions or None for a dense layer, K, O)
    (1, 1, None, 7, 3), (5, 9, None, 130, 70), (33, 40, None, 64, 64),
    (3, 4, 50, 36, 20), (2, 7, 1, 9, 33), (4, 4, 17, 100, 5),
]


@pytest.mark.parametrize(("n", "m", "length", "k", "o"), CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_indexed_matmul_equals_reference(ops, n, m, length, k, o, with_bias):
    g = torch.Generator().manual_seed(n * 1000 + k)
    x = torch.randn(n, k, generator=g) if length is None else torch.randn(n, length, k,
                                                                           generator=g)
    w = torch.randn(m, o, k, generator=g)
    b = torch.randn(m, o, generator=g) if with_bias else None
    idx = torch.randperm(m, generator=g)[:n] if n <= m else torch.randint(0, m, (n,),
                                                                          generator=g)
    got = ops.indexed_matmul(x, w, idx, b)
    torch.testing.assert_close(got, reference.indexed_matmul(x, w, idx, b), rtol=1e-5,
                               atol=1e-5)


def test_non_contiguous_inputs_and_empty_sets(ops):
    g = torch.Generator().manual_seed(0)
    big = torch.randn(6, 40, 3, generator=g)
    x = big[:, :, 1]  # [6, 40], stride 3
    w = torch.randn(10, 40, 25, generator=g).transpose(1, 2)  # [10, 25, 40], not contiguous
    b = torch.randn(25, 10, generator=g).t()  # [10, 25], not contiguous
    idx = torch.tensor([[9, 0], [3, 0], [3, 0], [7, 0], [1, 0], [4, 0]])[:, 0]  # strided
    assert not (x.is_contiguous() or w.is_contiguous() or b.is_contiguous() or
                idx.is_contiguous())
    torch.testing.assert_close(ops.indexed_matmul(x, w, idx, b),
                               reference.indexed_matmul(x, w, idx, b), rtol=1e-5, atol=1e-5)
    conv = torch.randn(3, 12, 8, generator=g).transpose(1, 2)  # [3, 8, 12] im2col view
    wc = torch.randn(5, 12, 7, generator=g).transpose(1, 2)  # [5, 7, 12]
    torch.testing.assert_close(ops.indexed_matmul(conv, wc, torch.tensor([4, 0, 2])),
                               reference.indexed_matmul(conv, wc, torch.tensor([4, 0, 2])),
                               rtol=1e-5, atol=1e-5)
    empty = ops.indexed_matmul(torch.zeros(0, 40), w, torch.zeros(0, dtype=torch.long), b)
    assert empty.shape == (0, 25)
    assert ops.indexed_matmul(torch.zeros(0, 5, 40), w, torch.zeros(0, dtype=torch.long),
                              ).shape == (0, 5, 25)


def test_perturb_into_equals_the_host_decoders_bit_for_bit(ops):
    noise = NoiseTable(seed=3, size=1 << 14)
    decoder = ChainDecoder(noise, 1000, init_std=0.1)
    parent = SeedChain(5).mutate(7, 0.01)
    child = parent.mutate(11, 0.002)
    out = torch.empty(1000)
    ops.perturb_into(out, decoder.decode(parent), noise.table(), noise.offset(11, 1000), 0.002)
    assert torch.equal(out, decoder.decode(child))
    center = torch.randn(1000)
    es = PerturbationDecoder(noise, center, 0.02)
    ops.perturb_into(out, center, noise.table(), noise.offset(9, 1000), -0.02)
    assert torch.equal(out, es.decode(Perturbation(9, -1)))
    part = torch.empty(10, 20)  # a slot row of one layer, written in place
    ops.perturb_into(part, center[100:300], noise.table(), noise.offset(9, 1000) + 100, 0.02)
    assert torch.equal(part.view(-1), es.decode(Perturbation(9, 1))[100:300])


def test_backend_selection(monkeypatch):
    monkeypatch.delenv("NEUROEVO_KERNELS", raising=False)
    assert backend(torch.zeros(1)) == "reference"  # CPU tensors
    monkeypatch.setenv("NEUROEVO_KERNELS", "reference")
    assert backend(torch.zeros(1)) == "reference"
    monkeypatch.setenv("NEUROEVO_KERNELS", "fast")
    with pytest.raises(ValueError, match="NEUROEVO_KERNELS must be auto, triton or reference"):
        backend(torch.zeros(1))
    assert importlib.import_module("neuroevo.kernels").reference is reference


@pytest.mark.parametrize("forced", ["triton", "reference"])
def test_slot_storage_decoded_in_place_equals_load_of_decode(monkeypatch, forced):
    from neuroevo.policy.batched import SlotParams
    from neuroevo.policy.nets import build_template

    monkeypatch.setenv("NEUROEVO_KERNELS", forced)
    _, spec = build_template("mlp", (5,), 2, (8, 8))
    noise = NoiseTable(seed=1, size=1 << 12)
    decoder = ChainDecoder(noise, spec.num_params, init_std=0.5)
    parent = SeedChain(3)
    decoder._remember(parent, decoder.decode(parent))  # a cached parent, as in a generation
    child = parent.mutate(21, 0.01)
    base, offset, scale = decoder.parts(child)
    fused, plain = SlotParams(spec, 3), SlotParams(spec, 3)
    fused.load_perturbed(1, base, noise.table(), offset, scale)
    plain.load(1, decoder.decode(child))
    assert all(torch.equal(fused.layers[k], plain.layers[k]) for k in plain.layers)
    assert decoder.parts(SeedChain(4).mutate(1, 0.1)) is None  # parent not cached: decode


def test_forward_through_the_kernel_equals_the_reference(ops):
    from neuroevo.policy.batched import BatchedPolicy
    from neuroevo.policy.nets import build_template

    g = torch.Generator().manual_seed(0)
    for net, obs in (("mlp", torch.randn(3, 6, generator=g)),
                     ("small", torch.randint(0, 255, (2, 4, 84, 84), generator=g))):
        template, spec = build_template(net, tuple(obs.shape[1:]), 4, (16, 16))
        policy = BatchedPolicy(template, spec)
        params = torch.randn(len(obs), spec.num_params, generator=g) * 0.05
        torch.testing.assert_close(policy(params, obs), policy.reference(params, obs),
                                   rtol=1e-4, atol=1e-5)
