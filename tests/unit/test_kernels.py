"""The Triton kernels against their references: on CPU through Triton's interpreter (CI), on
a CUDA device compiled (``pytest tests/unit/test_kernels.py`` on a GPU machine; the references
then run on CPU copies, out of reach of TF32 and of cuBLAS's own summation orders)."""

import functools
import importlib
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from neuroevo import NoiseTable, SeedChain
from neuroevo.genomes import ChainDecoder, Perturbation, PerturbationDecoder
from neuroevo.kernels import REFERENCE, Kernels, from_environment, reference, select

pytest.importorskip("triton")

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def dev(*tensors):
    return [t.to(DEVICE) for t in tensors]


@pytest.fixture
def ops():
    """``neuroevo.kernels``' calls with the Triton backend on ``DEVICE`` tensors (on CPU the
    interpreter, which tests/conftest.py turns on before anything imports triton)."""
    import neuroevo.kernels as kernels
    import neuroevo.kernels.triton_ops as triton_ops

    if DEVICE.type == "cpu":
        assert type(triton_ops._gemv).__name__ == "InterpretedFunction", \
            "triton was imported before TRITON_INTERPRET was set"
    return SimpleNamespace(
        indexed_matmul=functools.partial(kernels.indexed_matmul, backend="triton"),
        perturb_into=functools.partial(kernels.perturb_into, backend="triton"),
        kernels=select(DEVICE, "triton"))


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
    got = ops.indexed_matmul(*dev(x, w, idx), *(dev(b) if with_bias else [None]))
    torch.testing.assert_close(got.cpu(), reference.indexed_matmul(x, w, idx, b), rtol=1e-5,
                               atol=1e-5)


def test_non_contiguous_inputs_and_empty_sets(ops):
    g = torch.Generator().manual_seed(0)
    big = torch.randn(6, 40, 3, generator=g)
    x = big[:, :, 1]  # [6, 40], stride 3
    w = torch.randn(10, 40, 25, generator=g).transpose(1, 2)  # [10, 25, 40], not contiguous
    b = torch.randn(25, 10, generator=g).t()  # [10, 25], not contiguous
    idx = torch.tensor([[9, 0], [3, 0], [3, 0], [7, 0], [1, 0], [4, 0]])[:, 0]  # strided
    xd = big.to(DEVICE)[:, :, 1]
    wd = w.to(DEVICE).transpose(1, 2).contiguous().transpose(1, 2)  # strides kept on device
    bd = b.to(DEVICE).t().contiguous().t()
    idxd = torch.stack([idx, idx], 1).to(DEVICE)[:, 0]  # stride 2 on the device too
    assert not any(t.is_contiguous() for t in (x, w, b, idx, xd, wd, bd, idxd))
    assert xd.stride() == x.stride() and wd.stride() == w.stride() and bd.stride() == b.stride()
    torch.testing.assert_close(ops.indexed_matmul(xd, wd, idxd, bd).cpu(),
                               reference.indexed_matmul(x, w, idx, b), rtol=1e-5, atol=1e-5)
    conv = torch.randn(3, 12, 8, generator=g).transpose(1, 2)  # [3, 8, 12] im2col view
    wc = torch.randn(5, 12, 7, generator=g).transpose(1, 2)  # [5, 7, 12]
    pick = torch.tensor([4, 0, 2])
    want = reference.indexed_matmul(conv, wc, pick)
    convd, wcd = (t.to(DEVICE).transpose(1, 2).contiguous().transpose(1, 2) for t in (conv, wc))
    torch.testing.assert_close(ops.indexed_matmul(convd, wcd, pick.to(DEVICE)).cpu(), want,
                               rtol=1e-5, atol=1e-5)
    # A strided output: the [N, O, L] result written through its [N, L, O] transpose.
    out = torch.full((3, 7, 8), float("nan"), device=DEVICE)
    assert ops.indexed_matmul(convd, wcd, pick.to(DEVICE), out=out.transpose(1, 2)) is not None
    torch.testing.assert_close(out.transpose(1, 2).cpu(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"out has shape \(3, 7, 8\), needs \(3, 8, 7\)"):
        ops.indexed_matmul(convd, wcd, pick.to(DEVICE), out=out)
    empty = ops.indexed_matmul(torch.zeros(0, 40, device=DEVICE), wd,
                               torch.zeros(0, dtype=torch.long, device=DEVICE), bd)
    assert empty.shape == (0, 25)
    assert ops.indexed_matmul(torch.zeros(0, 5, 40, device=DEVICE), wd,
                              torch.zeros(0, dtype=torch.long, device=DEVICE),
                              ).shape == (0, 5, 25)


def test_the_reference_writes_into_a_given_output():
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(4, 6, 9, generator=g), torch.randn(3, 5, 9, generator=g)
    idx = torch.tensor([2, 2, 0, 1])
    out = torch.empty(4, 5, 6)
    reference.indexed_matmul(x, w, idx, out=out.transpose(1, 2))
    naive = torch.stack([x[i] @ w[idx[i]].T for i in range(4)])
    torch.testing.assert_close(out.transpose(1, 2), naive)


def test_perturb_into_equals_the_host_decoders_bit_for_bit(ops):
    noise = NoiseTable(seed=3, size=1 << 14)
    table = noise.table().to(DEVICE)
    decoder = ChainDecoder(noise, 1000, init_std=0.1)
    parent = SeedChain(5).mutate(7, 0.01)
    child = parent.mutate(11, 0.002)
    out = torch.empty(1000, device=DEVICE)
    ops.perturb_into(out, decoder.decode(parent).to(DEVICE), table, noise.offset(11, 1000),
                     0.002)
    assert torch.equal(out.cpu(), decoder.decode(child))
    center = torch.randn(1000)
    es = PerturbationDecoder(noise, center, 0.02)
    ops.perturb_into(out, center.to(DEVICE), table, noise.offset(9, 1000), -0.02)
    assert torch.equal(out.cpu(), es.decode(Perturbation(9, -1)))
    part = torch.empty(10, 20, device=DEVICE)  # a slot row of one layer, written in place
    ops.perturb_into(part, center[100:300].to(DEVICE), table, noise.offset(9, 1000) + 100,
                     0.02)
    assert torch.equal(part.view(-1).cpu(), es.decode(Perturbation(9, 1))[100:300])


def test_select_resolves_auto_and_names_bad_values(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton on CPU tensors, on a GPU machine too
    assert select("cpu") == Kernels("reference", "grouped")  # grouped: faster on a CPU
    assert select("cpu", "triton") == Kernels("triton", "im2col")  # the kernels' own path
    assert select("cpu", "triton", "grouped") == Kernels("triton", "grouped")
    assert select("cpu", "reference", "im2col") == Kernels("reference", "im2col")
    assert select("cuda", "reference") == Kernels("reference", "im2col")  # 2.7x on an H200
    with pytest.raises(ValueError, match="NEUROEVO_KERNELS must be auto, triton or reference"):
        select("cpu", "fast")
    with pytest.raises(ValueError, match="NEUROEVO_CONV must be auto, im2col or grouped"):
        select("cpu", conv="winograd")
    with pytest.raises(ValueError, match="kernels must be one of"):
        Kernels("fast", "grouped")
    monkeypatch.setenv("NEUROEVO_KERNELS", "reference")
    monkeypatch.setenv("NEUROEVO_CONV", "im2col")
    assert from_environment("cpu") == Kernels("reference", "im2col")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="on a CPU needs Triton's interpreter"):
        select("cpu", "triton")
    assert str(Kernels("triton", "im2col")) == "triton, im2col"
    assert importlib.import_module("neuroevo.kernels").reference is reference


@pytest.mark.parametrize("forced", ["triton", "reference"])
def test_slot_storage_decoded_in_place_equals_load_of_decode(forced):
    from neuroevo.policy.batched import SlotParams
    from neuroevo.policy.nets import build_template

    _, spec = build_template("mlp", (5,), 2, (8, 8))
    noise = NoiseTable(seed=1, size=1 << 12)
    decoder = ChainDecoder(noise, spec.num_params, init_std=0.5)
    parent = SeedChain(3)
    decoder._remember(parent, decoder.decode(parent))  # a cached parent, as in a generation
    child = parent.mutate(21, 0.01)
    base, offset, scale = decoder.parts(child)
    device = DEVICE if forced == "triton" else "cpu"
    fused, plain = SlotParams(spec, 3, device, select(device, forced)), SlotParams(spec, 3)
    fused.load_perturbed(1, base.to(device), noise.table().to(device), offset, scale)
    plain.load(1, decoder.decode(child))
    assert all(torch.equal(fused.layers[k].cpu(), plain.layers[k]) for k in plain.layers)
    assert decoder.parts(SeedChain(4).mutate(1, 0.1)) is None  # parent not cached: decode


NETS = {"mlp": (6,), "small": (4, 84, 84), "large": (4, 42, 42)}


def net_and_data(net: str, population: int, seed: int = 0, kernels: Kernels = REFERENCE):
    from neuroevo.policy.batched import BatchedPolicy
    from neuroevo.policy.nets import build_template

    g = torch.Generator().manual_seed(seed)
    shape = NETS[net]
    obs = (torch.randn(population, *shape, generator=g) if net == "mlp" else
           torch.randint(0, 255, (population, *shape), generator=g, dtype=torch.uint8))
    template, spec = build_template(net, shape, 4, (16, 16))
    params = torch.randn(population, spec.num_params, generator=g) * 0.05
    return BatchedPolicy(template, spec, kernels), params, obs


@pytest.mark.parametrize(("net", "conv"), [("mlp", "auto"), ("small", "im2col"),
                                           ("small", "grouped"), ("large", "im2col")])
def test_forward_through_the_kernel_equals_the_reference(ops, net, conv):
    policy, params, obs = net_and_data(net, 3, kernels=select(DEVICE, "triton", conv))
    got = policy(*dev(params, obs)).cpu()
    torch.testing.assert_close(got, policy.reference(params, obs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("kernel", "stride"), [(8, 4), (4, 2), (3, 1)])
def test_patches_are_unfold_s_columns(kernel, stride):
    """The im2col paths read patches from one strided copy, not ``F.unfold`` (one launch per
    image on CUDA); the columns and their (C, kh, kw) order must be unfold's."""
    from neuroevo.policy.batched import patches

    x = torch.randn(3, 4, 23, 23, generator=torch.Generator().manual_seed(kernel))
    assert torch.equal(patches(x, kernel, stride),
                       F.unfold(x, kernel, stride=stride).transpose(1, 2))


def test_the_im2col_reference_path_equals_the_grouped_convolution():
    policy, params, obs = net_and_data("small", 3, kernels=Kernels("reference", "grouped"))
    grouped = policy(params, obs)
    im2col, _, _ = net_and_data("small", 3, kernels=Kernels("reference", "im2col"))
    torch.testing.assert_close(im2col(params, obs), grouped, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grouped, policy.reference(params, obs), rtol=1e-4, atol=1e-5)


def test_flat_parameters_take_the_strides_of_slot_rows():
    """Triton specialises a kernel on its stride arguments' divisibility, and the summation
    order can follow: flat parameters (a row of D) and a batch of one (whose row stride torch
    sets freely) must reach the kernels strided as the engine's slot rows, or a replay on a
    GPU could differ from its episode in the last bits (seen on an H200, 2026-12-04)."""
    policy, params, _ = net_and_data("small", 3)
    rows = policy.slot_storage(3).layers
    for batch in (params, params[1:2]):
        for name, t in policy.slot_layers(batch).items():
            assert t.stride() == rows[name][:len(batch)].stride(), name


@pytest.mark.slow
def test_a_network_s_output_through_the_kernels_does_not_depend_on_the_batch(ops):
    """Each program reads one row's weights and input in a fixed order: a network's actions
    are the same bits whichever other networks share its forward pass (slot layouts, ragged
    active sets), which the engine's determinism across layouts rests on."""
    policy, params, obs = net_and_data("small", 4, seed=1, kernels=ops.kernels)
    params, obs = dev(params, obs)
    whole = policy(params, obs)
    for rows in ([2], [3, 0], [1, 2, 3]):
        assert torch.equal(policy(params[rows], obs[rows]), whole[rows])
