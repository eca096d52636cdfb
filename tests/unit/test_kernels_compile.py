"""The Triton kernels compile for Hopper (sm_90, the H100/H200) on this GPU-less machine, and
their machine code has what the engine relies on (scripts/compile_kernels.py)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("triton")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "compile_kernels.py"


def test_the_kernels_compile_for_hopper_as_the_engine_launches_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, str(SCRIPT), "--arch", "90", "--json",
                          str(tmp_path / "facts.json")], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts.pop("arch") == 90
    assert set(facts) == {"gemv_aligned", "gemv_unaligned", "gemm_im2col", "perturb"}
    for name, f in facts.items():
        assert f["local"] == 0 and f["stack"] == 0, f"{name} spills registers: {f}"
    # The decode rounds after the multiply and after the add, as the host decoders do.
    p = facts["perturb"]
    assert p["fma.rn.f32"] == 0 and p["mul.rn.f32"] > 0 and p["add.rn.f32"] > 0
    # Dense layers stream their weights with 16-byte loads; convolutions pipeline theirs
    # into Hopper's tensor cores (wgmma), inputs split into TF32 parts (tf32x3).
    assert facts["gemv_aligned"]["ld.global.v4"] > 0
    conv = facts["gemm_im2col"]
    assert conv["cp.async"] > 0 and conv["wgmma.mma_async"] > 0 and conv["cvt.rna.tf32"] > 0


def test_the_compiler_refuses_to_run_under_the_interpreter():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert out.returncode != 0 and "unset it" in out.stderr
