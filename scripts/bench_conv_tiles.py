"""im2col tile variants of the Triton convolution kernel on a GPU, whole forwards side by side.

Run (CUDA only): python scripts/bench_conv_tiles.py [--json FILE]

For the large and small Atari nets at a population of 1,000 (slot rows, random weights and
frames): the milliseconds of each part of a forward pass (patches and whole convolution per
layer, the dense layer, the forward), then for each (BLOCK_L, BLOCK_O, BLOCK_K, precision,
warps, stages) variant of ``triton_ops._gemm``: forwards/s, the largest error over the largest
output against the reference (cuDNN, TF32 off), and whether 7 networks computed alone give
the bits they give among 1,000. Each variant launches ``triton_ops._gemm`` itself with its
tile, precision, warps and stages. This is how the tile in ``kernels/triton_ops.py`` was chosen
(experiments/bench/gpu-conv-variants-h200.json).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton

import neuroevo.kernels.triton_ops as T
from neuroevo.files import atomic_write
from neuroevo.kernels import Kernels
from neuroevo.policy.batched import BatchedPolicy, SlotParams, batched_conv, batched_dense, patches
from neuroevo.policy.nets import build_template, same_pad

VARIANTS = [(32, 32, 32, "ieee", 4, 3), (64, 64, 32, "ieee", 4, 3),
            (64, 64, 32, "tf32x3", 4, 3), (128, 64, 32, "tf32x3", 4, 3)]


def variant(original, bl, bo, bk, prec, warps, stages):
    """``triton_ops.indexed_matmul`` with the im2col kernel launched as this variant."""
    def indexed_matmul(x, w, idx, bias, out):
        if x.dim() == 2:
            return original(x, w, idx, bias, out)
        b = bias if bias is not None else w
        sb = (b.stride(0), b.stride(1)) if bias is not None else (0, 0)
        grid = (x.shape[0], triton.cdiv(x.shape[1], bl), triton.cdiv(w.shape[1], bo))
        T._gemm[grid](x, w, b, idx.contiguous(), out, x.shape[1], w.shape[2], w.shape[1],
                      *x.stride(), *w.stride(), *sb, *out.stride(), HAS_BIAS=bias is not None,
                      BLOCK_L=bl, BLOCK_O=bo, BLOCK_K=bk, PRECISION=prec, num_warps=warps,
                      num_stages=stages, enable_fp_fusion=True)
        return out
    return indexed_matmul


def best(fn, repeats: int = 5) -> float:
    fn()
    torch.cuda.synchronize()  # sync: time the work, not its launch
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return min(times)


def parts(policy: BatchedPolicy, layers: dict, obs: torch.Tensor) -> dict[str, float]:
    ms, x = {}, obs.float() / 255.0
    for i, (k, s) in enumerate(policy.template.kernels):
        w, b = layers[f"convs.{i}.weight"], layers[f"convs.{i}.bias"]
        xp = same_pad(x, k, s)
        ms[f"patches{i}_ms"] = best(lambda: patches(xp, k, s)) * 1e3  # noqa: B023
        ms[f"conv{i}_ms"] = best(lambda: batched_conv(x, w, b, k, s, policy.kernels)) * 1e3  # noqa: B023
        x = torch.relu(batched_conv(x, w, b, k, s, policy.kernels))
    h = x.flatten(1)
    ms["fc_ms"] = best(lambda: batched_dense(h, layers["fc.weight"], layers["fc.bias"],
                                             policy.kernels)) * 1e3
    ms["forward_ms"] = best(lambda: policy.forward(layers, obs)) * 1e3
    return {k: round(v, 3) for k, v in ms.items()}


def bench(net: str, population: int, device: torch.device) -> dict:
    template, spec = build_template(net, (4, 84, 84), 18)
    slots = SlotParams(spec, population, device)
    g = torch.Generator(device=device).manual_seed(0)
    for t in slots.layers.values():
        t.normal_(0.0, 0.01, generator=g)
    obs = torch.randint(0, 255, (population, 4, 84, 84), generator=g, device=device,
                        dtype=torch.uint8)
    layers = slots.prefix(population)
    reference = BatchedPolicy(template, spec, Kernels("reference", "grouped"))
    expected = reference.forward(layers, obs)
    row = {"reference_fps": round(population / best(lambda: reference.forward(layers, obs)))}
    policy = BatchedPolicy(template, spec, Kernels("triton", "im2col"))
    row["parts"] = parts(policy, layers, obs)
    original = T.indexed_matmul
    try:
        for v in VARIANTS:
            T.indexed_matmul = variant(original, *v)
            out = policy.forward(layers, obs)
            alone = policy.forward(slots.prefix(7), obs[:7])
            row[str(v)] = {
                "fps": round(population / best(lambda: policy.forward(layers, obs))),
                "rel_err": ((out - expected).abs().max() / expected.abs().max()).item(),
                "indep": bool(torch.equal(alone, out[:7]))}
            print(net, v, row[str(v)], flush=True)
    finally:
        T.indexed_matmul = original
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--population", type=int, default=1000)
    p.add_argument("--json", default="")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_conv_tiles.py needs a CUDA device")
    torch.backends.cudnn.allow_tf32 = False  # the reference at float32
    device = torch.device("cuda")
    rows = {f"speed_{net}": bench(net, args.population, device) for net in ("large", "small")}
    print(json.dumps(rows, indent=1))
    if args.json:
        atomic_write(args.json, json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
