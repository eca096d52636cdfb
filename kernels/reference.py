"""The pure-torch references: the CPU path of every kernel, and the oracle of the tests."""

from __future__ import annotations

import torch


def indexed_matmul(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor,
                   bias: torch.Tensor | None = None,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """``out[i] = x[i] @ w[idx[i]]^T (+ bias[idx[i]])``.

    ``x`` is ``[N, K]`` (a dense layer) or ``[N, L, K]`` (a convolution as im2col: L output
    positions); ``w`` is ``[M, O, K]`` (torch's out x in layout, M stored networks); ``idx``
    ``[N]`` picks each row's network. Returns ``[N, O]`` or ``[N, L, O]``, in ``out`` if
    given.
    """
    rows = x.unsqueeze(1) if x.dim() == 2 else x  # [N, L, K]
    weights = w[idx]  # [N, O, K]: the gather copy the kernel avoids
    if bias is None:
        result = torch.bmm(rows, weights.transpose(1, 2))
    else:
        result = torch.baddbmm(bias[idx].unsqueeze(1), rows, weights.transpose(1, 2))
    result = result.squeeze(1) if x.dim() == 2 else result
    return result if out is None else out.copy_(result)


def perturb_into(out: torch.Tensor, base: torch.Tensor, noise: torch.Tensor, offset: int,
                 scale: float) -> torch.Tensor:
    """``out = base + noise[offset : offset + n] * scale`` (n = ``base.numel()``), the
    float32 operations of the host decoders in their order: bit-equal to them."""
    n = base.numel()
    out.view(-1).copy_(base.reshape(-1) + noise[offset:offset + n] * scale)
    return out
