"""Fast kernels with pure-torch references: ``neuroevo.kernels``.

- ``indexed_matmul(x, w, idx, bias)``: ``out[i] = x[i] @ w[idx[i]]^T + bias[idx[i]]`` for
  the active rows, weights read in place (dense layers; convolutions as im2col).
- ``perturb_into(out, base, noise, offset, scale)``: ``out = base + noise[offset:] * scale``
  written straight into slot storage (GA child of a cached parent, ES member).

The Triton kernel runs when its tensors are on a CUDA device and Triton is installed;
otherwise the reference in ``reference.py`` runs. ``NEUROEVO_KERNELS=reference`` forces the
reference everywhere; ``NEUROEVO_KERNELS=triton`` forces the kernels on CPU tensors too,
which needs Triton's interpreter (``TRITON_INTERPRET=1`` set before triton is first
imported): that is how CI tests them. ``backend(t)`` says which one a tensor gets, and
``conv_path(t)`` how convolutions are computed for it.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

from neuroevo.errors import ConfigError, DependencyNotInstalled
from neuroevo.kernels import reference

BACKENDS = ("triton", "reference")
CONV_PATHS = ("im2col", "grouped")


def backend(t: torch.Tensor) -> str:
    """``"triton"`` or ``"reference"``: what runs for tensors like ``t``."""
    forced = os.environ.get("NEUROEVO_KERNELS", "")
    if forced and forced not in (*BACKENDS, "auto"):
        raise ConfigError(f"NEUROEVO_KERNELS must be auto, triton or reference, got "
                          f"{forced!r}; unset it or set one of those")
    if forced == "triton" and not _has_triton():
        raise DependencyNotInstalled("NEUROEVO_KERNELS=triton but triton is not installed; "
                                     "pip install -e '.[kernels]' or unset it")
    if forced == "reference" or not _has_triton():
        return "reference"
    return "triton" if t.is_cuda or forced == "triton" else "reference"


def selection(device: torch.device) -> tuple[str, str]:
    """``(backend, conv_path)`` for tensors on ``device``. Evaluators call it when they are
    made, so a bad ``NEUROEVO_*`` value stops a run before it starts."""
    t = torch.empty(0, device=device)
    chosen = backend(t), conv_path(t)
    if chosen[0] == "triton" and not t.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise ConfigError("NEUROEVO_KERNELS=triton on a CPU needs Triton's interpreter "
                          "(TRITON_INTERPRET=1, slow: for tests); unset NEUROEVO_KERNELS")
    return chosen


@functools.cache
def _has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def _impl(t: torch.Tensor):
    if backend(t) == "reference":
        return reference
    from neuroevo.kernels import triton_ops

    return triton_ops


def conv_path(t: torch.Tensor) -> str:
    """How the policies compute convolutions for tensors like ``t``: ``"im2col"`` (patches
    through ``indexed_matmul``) where the kernels run, ``"grouped"`` (one grouped
    convolution) where the references run, which measures faster on a CPU.
    ``NEUROEVO_CONV=im2col|grouped`` forces one."""
    forced = os.environ.get("NEUROEVO_CONV", "")
    if forced and forced not in ("auto", *CONV_PATHS):
        raise ConfigError(f"NEUROEVO_CONV must be auto, im2col or grouped, got {forced!r}; "
                          "unset it or set one of those")
    if forced in CONV_PATHS:
        return forced
    return "im2col" if backend(t) == "triton" else "grouped"


def indexed_matmul(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor,
                   bias: torch.Tensor | None = None,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """See ``reference.indexed_matmul``; float32, no gradients. ``out``, if given, receives
    the result in whatever strides it has (e.g. a ``[N, O, L]`` tensor's transpose, so a
    convolution's output comes out channels-first without a copy)."""
    shape = (x.shape[0], w.shape[1]) if x.dim() == 2 else (*x.shape[:2], w.shape[1])
    if out is not None and tuple(out.shape) != shape:
        raise ValueError(f"indexed_matmul: out has shape {tuple(out.shape)}, needs {shape}")
    if x.shape[0] == 0:
        return out if out is not None else torch.empty(shape, device=x.device)
    impl = _impl(x)
    if impl is reference:
        return reference.indexed_matmul(x, w, idx, bias, out)
    if out is None:
        out = torch.empty(shape, device=x.device, dtype=torch.float32)
    return impl.indexed_matmul(x, w, idx, bias, out)


def perturb_into(out: torch.Tensor, base: torch.Tensor, noise: torch.Tensor, offset: int,
                 scale: float) -> torch.Tensor:
    """See ``reference.perturb_into``; ``out`` and ``base`` contiguous, float32."""
    if base.numel() == 0:
        return out
    return _impl(out).perturb_into(out, base, noise, offset, scale)
