"""Fast kernels with pure-torch references: ``neuroevo.kernels``.

- ``indexed_matmul(x, w, idx, bias)``: ``out[i] = x[i] @ w[idx[i]]^T + bias[idx[i]]`` for
  the active rows, weights read in place (dense layers; convolutions as im2col).
- ``perturb_into(out, base, noise, offset, scale)``: ``out = base + noise[offset:] * scale``
  written straight into slot storage (GA child of a cached parent, ES member).

Each takes ``backend``: ``"triton"`` (the kernels in ``triton_ops.py``) or ``"reference"``
(pure torch, ``reference.py``). A run chooses once, when it is built (``from_environment``):
by default the kernels on a CUDA device when Triton is installed, the reference otherwise.
``NEUROEVO_KERNELS=reference`` forces the reference; ``NEUROEVO_KERNELS=triton`` forces the
kernels on CPU tensors too, which needs Triton's interpreter (``TRITON_INTERPRET=1`` set
before triton is first imported): that is how CI tests them. ``NEUROEVO_CONV`` picks the
convolution path (``Kernels``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass

import torch

from neuroevo.errors import ConfigError, DependencyNotInstalled
from neuroevo.kernels import reference

BACKENDS = ("triton", "reference")
CONV_PATHS = ("im2col", "grouped")


@dataclass(frozen=True)
class Kernels:
    """What a population's layers run: the matmul ``backend`` and the ``conv`` path.

    ``"im2col"`` computes convolutions as patches through ``indexed_matmul``; ``"grouped"``
    as one grouped convolution, which measures faster on a CPU. Chosen once per run
    (``select``) and held by the ``BatchedPolicy``.
    """

    backend: str = "reference"
    conv: str = "grouped"

    def __post_init__(self):
        if self.backend not in BACKENDS or self.conv not in CONV_PATHS:
            raise ConfigError(f"kernels must be one of {BACKENDS} with a conv path of "
                              f"{CONV_PATHS}, got {self.backend!r} and {self.conv!r}")

    def __str__(self) -> str:
        return f"{self.backend}, {self.conv}"


REFERENCE = Kernels()


def select(device, backend: str = "auto", conv: str = "auto") -> Kernels:
    """The kernels for tensors on ``device``: ``auto`` is Triton on a CUDA device when it is
    installed, the reference otherwise, and the conv path fastest there: im2col on a GPU,
    grouped with the reference on a CPU.
    ``backend="triton"`` on a CPU runs Triton's interpreter (needs ``TRITON_INTERPRET=1``
    before triton is first imported; slow, for tests)."""
    device = torch.device(device)
    if backend not in (*BACKENDS, "auto"):
        raise ConfigError(f"NEUROEVO_KERNELS must be auto, triton or reference, got "
                          f"{backend!r}; unset it or set one of those")
    if conv not in (*CONV_PATHS, "auto"):
        raise ConfigError(f"NEUROEVO_CONV must be auto, im2col or grouped, got {conv!r}; "
                          "unset it or set one of those")
    if backend == "triton" and not _has_triton():
        raise DependencyNotInstalled("NEUROEVO_KERNELS=triton but triton is not installed; "
                                     "pip install -e '.[kernels]' or unset it")
    if backend == "auto":
        backend = "triton" if device.type == "cuda" and _has_triton() else "reference"
    if (backend == "triton" and device.type != "cuda"
            and os.environ.get("TRITON_INTERPRET") != "1"):
        raise ConfigError("NEUROEVO_KERNELS=triton on a CPU needs Triton's interpreter "
                          "(TRITON_INTERPRET=1, slow: for tests); unset NEUROEVO_KERNELS")
    if conv == "auto":  # measured: kernels/README.md
        conv = "im2col" if backend == "triton" or device.type == "cuda" else "grouped"
    return Kernels(backend, conv)


def from_environment(device) -> Kernels:
    """``select`` with ``NEUROEVO_KERNELS`` and ``NEUROEVO_CONV`` (unset: ``auto``), the only
    place they are read: a run resolves its kernels once, when it is built."""
    return select(device, os.environ.get("NEUROEVO_KERNELS") or "auto",
                  os.environ.get("NEUROEVO_CONV") or "auto")


@functools.cache
def _has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def _impl(backend: str):
    if backend == "reference":
        return reference
    from neuroevo.kernels import triton_ops

    return triton_ops


def indexed_matmul(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor,
                   bias: torch.Tensor | None = None, out: torch.Tensor | None = None,
                   backend: str = "reference") -> torch.Tensor:
    """See ``reference.indexed_matmul``; float32, no gradients. ``out``, if given, receives
    the result in whatever strides it has (e.g. a ``[N, O, L]`` tensor's transpose, so a
    convolution's output comes out channels-first without a copy)."""
    shape = (x.shape[0], w.shape[1]) if x.dim() == 2 else (*x.shape[:2], w.shape[1])
    if out is not None and tuple(out.shape) != shape:
        raise ValueError(f"indexed_matmul: out has shape {tuple(out.shape)}, needs {shape}")
    if x.shape[0] == 0:
        return out if out is not None else torch.empty(shape, device=x.device)
    impl = _impl(backend)
    if impl is reference:
        return reference.indexed_matmul(x, w, idx, bias, out)
    if out is None:
        out = torch.empty(shape, device=x.device, dtype=torch.float32)
    return impl.indexed_matmul(x, w, idx, bias, out)


def perturb_into(out: torch.Tensor, base: torch.Tensor, noise: torch.Tensor, offset: int,
                 scale: float, backend: str = "reference") -> torch.Tensor:
    """See ``reference.perturb_into``; ``out`` and ``base`` contiguous, float32."""
    if base.numel() == 0:
        return out
    return _impl(backend).perturb_into(out, base, noise, offset, scale)
