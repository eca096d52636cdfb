"""The Triton kernels (CUDA; on CPU tensors under ``TRITON_INTERPRET=1``, as in the tests).

``indexed_matmul`` reads each row's weights in place through ``idx`` (no gather copy): one
program per (row, block of L, block of O) for convolutions as im2col, and a matrix-vector
program per (row, block of O) for dense layers, where the layer is a pure weight stream
(bandwidth-bound: each weight is read once per step). Strides are passed explicitly, so
non-contiguous inputs work without copies.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gemv(x_ptr, w_ptr, b_ptr, idx_ptr, out_ptr, n_in, n_out,
          sxn, sxk, swm, swo, swk, sbm, sbo, son, soo,
          HAS_BIAS: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)  # offsets of large populations pass 2**31
    offs_o = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
    m = tl.load(idx_ptr + n).to(tl.int64)
    # Products are summed along K once, after the loop: a reduction across lanes in every
    # iteration would stall the weight stream this kernel exists to keep saturated.
    acc = tl.zeros((BLOCK_O, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        xk = tl.load(x_ptr + n * sxn + offs_k * sxk, mask=offs_k < n_in, other=0.0)
        wk = tl.load(w_ptr + m * swm + offs_o[:, None] * swo + offs_k[None, :] * swk,
                     mask=(offs_o[:, None] < n_out) & (offs_k[None, :] < n_in), other=0.0)
        acc += wk * xk[None, :]
    out = tl.sum(acc, axis=1)
    if HAS_BIAS:
        out += tl.load(b_ptr + m * sbm + offs_o * sbo, mask=offs_o < n_out, other=0.0)
    tl.store(out_ptr + n * son + offs_o * soo, out, mask=offs_o < n_out)


@triton.jit
def _gemm(x_ptr, w_ptr, b_ptr, idx_ptr, out_ptr, n_len, n_in, n_out,
          sxn, sxl, sxk, swm, swo, swk, sbm, sbo, son, sol, soo,
          HAS_BIAS: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_O: tl.constexpr,
          BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)  # offsets of large populations pass 2**31
    offs_l = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_o = tl.program_id(2) * BLOCK_O + tl.arange(0, BLOCK_O)
    m = tl.load(idx_ptr + n).to(tl.int64)
    acc = tl.zeros((BLOCK_L, BLOCK_O), dtype=tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + n * sxn + offs_l[:, None] * sxl + offs_k[None, :] * sxk,
                    mask=(offs_l[:, None] < n_len) & (offs_k[None, :] < n_in), other=0.0)
        bt = tl.load(w_ptr + m * swm + offs_k[:, None] * swk + offs_o[None, :] * swo,
                     mask=(offs_k[:, None] < n_in) & (offs_o[None, :] < n_out), other=0.0)
        acc += tl.dot(a, bt, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + m * sbm + offs_o * sbo, mask=offs_o < n_out, other=0.0)[None, :]
    tl.store(out_ptr + n * son + offs_l[:, None] * sol + offs_o[None, :] * soo, acc,
             mask=(offs_l[:, None] < n_len) & (offs_o[None, :] < n_out))


@triton.jit
def _perturb(out_ptr, base_ptr, noise_ptr, offset, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    base = tl.load(base_ptr + offs, mask=mask)
    eps = tl.load(noise_ptr + offset + offs, mask=mask)
    tl.store(out_ptr + offs, base + eps * scale, mask=mask)


# Tile sizes: fixed rather than autotuned, since a different tile sums in a different order
# and a run must give the same numbers every time it is repeated. FMA contraction is named at
# each launch for the same reason: Triton's default for it is announced to change.
GEMV_BLOCK_O, GEMV_BLOCK_K = 32, 128
# The im2col tile: on an H200 (2026-12-04, large net, population 1,000) 64x64x32 with
# tf32x3 ran whole forwards at 182k/s, 32x32x32 with "ieee" (FMA, no tensor cores) at 118k/s.
GEMM_BLOCK_L, GEMM_BLOCK_O, GEMM_BLOCK_K = 64, 64, 32
# Three TF32 products per tile: tensor cores at float32's accuracy (TF32 alone rounds inputs
# to 10 mantissa bits, which would blur a Deep GA mutation).
GEMM_PRECISION = "tf32x3"


def indexed_matmul(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor,
                   bias: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    o, k = w.shape[1], w.shape[2]
    idx = idx.contiguous()  # [N] indices: a copy of these is free; weights are never copied
    b = bias if bias is not None else w  # any pointer; HAS_BIAS=False never reads it
    sb = (b.stride(0), b.stride(1)) if bias is not None else (0, 0)
    if x.dim() == 2:
        grid = (x.shape[0], triton.cdiv(o, GEMV_BLOCK_O))
        _gemv[grid](x, w, b, idx, out, k, o, x.stride(0), x.stride(1), w.stride(0),
                    w.stride(1), w.stride(2), *sb, out.stride(0), out.stride(1),
                    HAS_BIAS=bias is not None, BLOCK_O=GEMV_BLOCK_O, BLOCK_K=GEMV_BLOCK_K,
                    enable_fp_fusion=True)
        return out
    length = x.shape[1]
    grid = (x.shape[0], triton.cdiv(length, GEMM_BLOCK_L), triton.cdiv(o, GEMM_BLOCK_O))
    _gemm[grid](x, w, b, idx, out, length, k, o, x.stride(0), x.stride(1), x.stride(2),
                w.stride(0), w.stride(1), w.stride(2), *sb, out.stride(0), out.stride(1),
                out.stride(2), HAS_BIAS=bias is not None, BLOCK_L=GEMM_BLOCK_L,
                BLOCK_O=GEMM_BLOCK_O, BLOCK_K=GEMM_BLOCK_K, PRECISION=GEMM_PRECISION,
                enable_fp_fusion=True)
    return out


def perturb_into(out: torch.Tensor, base: torch.Tensor, noise: torch.Tensor, offset: int,
                 scale: float) -> torch.Tensor:
    n = base.numel()
    # No fused multiply-add: the host decoders round after the multiply and after the add,
    # and a genome must decode to the same bits whichever path (cached parent or not) runs.
    _perturb[(triton.cdiv(n, 1024),)](out, base, noise, offset, scale, n, BLOCK=1024,
                                      enable_fp_fusion=False)
    return out
