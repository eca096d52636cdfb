"""Population forward passes: the Triton kernel path vs the torch reference path vs vmap.

Run: python scripts/bench_kernels.py [--nets large,small] [--populations 64,256,1000]
     [--device auto] [--repeats 3] [--max-gb GB] [--json FILE]

For each net and population size, side by side in one process (best of ``--repeats``
rounds, the paths interleaved in each):
- ``kernel``: ``BatchedPolicy.forward`` with the Triton kernels: dense layers through the
  indexed matmul, convolutions as im2col patches through it (CUDA only: on a CPU Triton
  runs only in its slow interpreter, not timed); ``kernel_grouped``: the same with
  grouped convolutions (cuDNN's), the alternative it must beat;
- ``reference``: the torch path (``Kernels("reference")``: grouped convolution and a
  batched matmul; the CPU path); ``reference_im2col``: the same with im2col convolutions;
- ``vmap``: ``torch.func.vmap(functional_call)``, the definition;
- ``fc_kernel`` / ``fc_reference``: the hidden dense layer alone (most of the weights), the
  pure weight stream that says how close the matmul itself comes to the memory bandwidth.
Figures are forwards/s (networks evaluated per second) and achieved GB/s of weight reads
(each network's weights are read once per forward), against the device's bandwidth measured
with a large copy. Populations whose weights do not fit the device's memory (or exceed
``--max-gb``) are skipped and listed; ``vmap`` runs where three copies of them fit.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time

import torch

from neuroevo.engine.pipeline import resolve_device
from neuroevo.files import atomic_write
from neuroevo.kernels import Kernels
from neuroevo.policy.batched import BatchedPolicy, SlotParams, batched_dense
from neuroevo.policy.nets import build_template


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()  # sync: time the work, not its launch


def best_times(paths: dict, device, repeats: int) -> dict[str, float]:
    """Best wall time of each path, the paths interleaved round by round so that a drift of
    the machine (clocks, neighbours) touches them all alike."""
    for fn in paths.values():
        fn()  # warm-up (kernel compilation, allocator)
    sync(device)
    times = {name: [] for name in paths}
    for _ in range(repeats):
        for name, fn in paths.items():
            t = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - t)
    return {name: min(ts) for name, ts in times.items()}


def bandwidth(device: torch.device, gib: float = 1.0) -> float:
    """GB/s of a large device copy (read + write)."""
    src = torch.empty(int(gib * (1 << 30)) // 4, device=device)
    dst = torch.empty_like(src)
    t = best_times({"copy": lambda: dst.copy_(src)}, device, 3)["copy"]
    return 2 * src.numel() * 4 / t / 1e9


def bench(net: str, population: int, device, repeats: int) -> dict:
    template, spec = build_template(net, (4, 84, 84), 18)
    template = template.to(device)
    policy = BatchedPolicy(template, spec)  # vmap's reference
    slots = SlotParams(spec, population, device)
    g = torch.Generator(device=device).manual_seed(0)  # filled where they live: GBs of them
    for t in slots.layers.values():
        t.normal_(0.0, 0.01, generator=g)
    obs = torch.randint(0, 255, (population, 4, 84, 84), generator=g, device=device,
                        dtype=torch.uint8)
    weight_gb = spec.num_params * 4 * population / 1e9
    layers = slots.prefix(population)
    forward = {"kernel": Kernels("triton", "im2col"),
               "kernel_grouped": Kernels("triton", "grouped"),
               "reference": Kernels("reference", "grouped"),
               "reference_im2col": Kernels("reference", "im2col")}
    if device.type != "cuda":
        del forward["kernel"], forward["kernel_grouped"]
    paths = {name: functools.partial(BatchedPolicy(template, spec, k).forward, layers, obs)
             for name, k in forward.items()}
    if 3 * weight_gb < 0.9 * memory_gb(device):  # vmap: flat parameters, a second copy, more
        flat = torch.cat([layers[e.name].reshape(population, -1) for e in spec], 1)
        paths["vmap"] = lambda: policy.reference(flat, obs)
    row = {"net": net, "population": population, "params": spec.num_params,
           "weight_gb": round(weight_gb, 3)}
    for name, t in best_times(paths, device, repeats).items():
        row[f"{name}_forwards_per_s"] = round(population / t, 1)
        row[f"{name}_gb_per_s"] = round(weight_gb / t, 2)
    w, b = layers["fc.weight"], layers["fc.bias"]
    x = torch.rand(population, w.shape[2], generator=g, device=device)
    fc_gb = (w.numel() + b.numel()) * 4 / 1e9
    fc = {"fc_kernel": Kernels("triton", "im2col"), "fc_reference": Kernels("reference")}
    if device.type != "cuda":
        del fc["fc_kernel"]
    fc = {name: functools.partial(batched_dense, x, w, b, k) for name, k in fc.items()}
    for name, t in best_times(fc, device, repeats).items():
        row[f"{name}_gb_per_s"] = round(fc_gb / t, 2)
    return row


def memory_gb(device: torch.device) -> float:
    """The GPU's memory, or the memory this machine has available now."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory / 1e9
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024 / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="large,small")
    p.add_argument("--populations", default="64,256,1000")
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-gb", type=float, help="skip larger weight sets (default: what fits)")
    p.add_argument("--json")
    args = p.parse_args()
    device = resolve_device(args.device)
    # Every path in float32: cuDNN's convolutions would otherwise round through TF32, a
    # cheaper and less exact computation than the kernels' own (input_precision="ieee").
    torch.backends.cudnn.allow_tf32 = False
    peak = bandwidth(device)
    print(f"device {device}: copy bandwidth {peak:.1f} GB/s", flush=True)
    rows, skipped = [], []
    for net in args.nets.split(","):
        for population in map(int, args.populations.split(",")):
            _, spec = build_template(net, (4, 84, 84), 18)
            gb = spec.num_params * 4 * population / 1e9
            limit = args.max_gb or 0.75 * memory_gb(device)  # room for activations
            if gb > limit:
                skipped.append(f"{net} x {population}: {gb:.1f} GB of weights > {limit:.1f} GB")
                print(f"skip  {skipped[-1]}", flush=True)
                continue
            row = bench(net, population, device, args.repeats)
            row.update({k.replace("gb_per_s", "of_peak"): round(v / peak, 3)
                        for k, v in row.items() if k.endswith("gb_per_s")})
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"device": str(device), "copy_gb_per_s": round(peak, 1), "results": rows,
              "skipped": skipped, "machine": {"cpu": platform.processor() or platform.machine(),
                                              "cores": os.cpu_count()}}
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
