"""Compile the Triton kernels for a GPU architecture on a machine without one, and report
what the machine code does: registers, spills, FMA contraction, vector loads.

Run: python scripts/compile_kernels.py [--arch 90] [--json FILE]

The interpreter that runs the kernels in CI checks their arithmetic, not that they compile,
nor how: this compiles each kernel as the engine launches it (slot storage: contiguous rows,
unit inner strides; im2col patches: unit strides along each patch) with Triton's own
compiler and ptxas, for ``--arch`` (90: Hopper, the H100/H200), and counts in the PTX and
the cubin's resource usage what the kernels rely on. tests/unit/test_kernels_compile.py
asserts on it. Needs triton; TRITON_INTERPRET must be unset (the test runs this script in a
subprocess without it).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from neuroevo.kernels import triton_ops

ALIGNED = [["tt.divisibility", 16]]  # what the launcher infers for 16-aligned pointers/ints
PTX_COUNTS = ("fma.rn.f32", "mul.rn.f32", "add.rn.f32", "ld.global.v4", "cp.async",
              "mma.sync", "wgmma.mma_async", "cvt.rna.tf32")


def variants() -> dict[str, tuple]:
    """name -> (kernel, {constexpr: value}, 16-aligned args, options)."""
    pointers = ["x_ptr", "w_ptr", "b_ptr", "idx_ptr", "out_ptr"]
    dense = {"sxk": 1, "swk": 1, "sbo": 1, "soo": 1, "HAS_BIAS": True,
             "BLOCK_O": triton_ops.GEMV_BLOCK_O, "BLOCK_K": triton_ops.GEMV_BLOCK_K}
    fused = {"enable_fp_fusion": True}
    return {
        # A hidden layer whose input width is a multiple of 16 (3136, 7744, 256, ...).
        "gemv_aligned": (triton_ops._gemv, dense,
                         [*pointers, "n_in", "n_out", "sxn", "swm", "swo", "sbm", "son"], fused),
        # A first MLP layer on a 17-wide observation (HalfCheetah): nothing but pointers aligned.
        "gemv_unaligned": (triton_ops._gemv, dense, pointers, fused),
        # Patches [P, L, C*k*k] (unit stride along the patch), filters read along C*k*k,
        # outputs written channels-first; widths 256, 512, 576: multiples of 16.
        "gemm_im2col": (triton_ops._gemm,
                        {"sxk": 1, "swk": 1, "sbo": 1, "sol": 1, "HAS_BIAS": True,
                         "BLOCK_L": triton_ops.GEMM_BLOCK_L, "BLOCK_O": triton_ops.GEMM_BLOCK_O,
                         "BLOCK_K": triton_ops.GEMM_BLOCK_K,
                         "PRECISION": triton_ops.GEMM_PRECISION},
                        [*pointers, "n_in", "sxn", "sxl", "swm", "swo", "son", "soo"], fused),
        "perturb": (triton_ops._perturb, {"BLOCK": 1024}, ["out_ptr", "base_ptr", "noise_ptr"],
                    {"enable_fp_fusion": False}),
    }


def compile_one(kernel, constexprs, aligned, options, arch: int, workdir: str,
                name: str) -> dict:
    names = kernel.arg_names

    def kind(arg):
        if arg in constexprs:
            return "constexpr"
        if arg == "idx_ptr":
            return "*i64"
        if arg.endswith("_ptr"):
            return "*fp32"
        return "fp32" if arg == "scale" else "i32"

    source = ASTSource(fn=kernel,
                       signature={a: kind(a) for a in names},
                       constexprs={(names.index(a),): v for a, v in constexprs.items()},
                       attrs={(names.index(a),): ALIGNED for a in aligned})
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    ptx = compiled.asm["ptx"]
    facts = {p: len(re.findall(re.escape(p) + r"[ .]", ptx)) for p in PTX_COUNTS}
    cubin = os.path.join(workdir, f"{name}.cubin")
    pathlib.Path(cubin).write_bytes(compiled.asm["cubin"])
    tool = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    usage = subprocess.run([str(tool), "--dump-resource-usage", cubin], capture_output=True,
                           text=True, check=True).stdout
    for key in ("REG", "STACK", "LOCAL"):
        facts[key.lower()] = int(re.search(rf"\b{key}:(\d+)", usage).group(1))
    facts["shared_bytes"] = compiled.metadata.shared
    return facts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: Hopper)")
    p.add_argument("--json", help="write the facts here")
    args = p.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("compile_kernels: TRITON_INTERPRET=1 runs kernels instead of compiling them; "
                 "unset it")
    with tempfile.TemporaryDirectory() as workdir:
        facts = {name: compile_one(*spec, args.arch, workdir, name)
                 for name, spec in variants().items()}
    for name, f in facts.items():
        print(f"{name:<15} " + "  ".join(f"{k} {v}" for k, v in f.items()))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"arch": args.arch, **facts}, indent=1))


if __name__ == "__main__":
    main()
