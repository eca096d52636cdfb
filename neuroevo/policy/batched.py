"""Population forward passes: ``(params, obs[P, ...]) -> outputs[P, A]``, P different networks.

``reference`` is ``torch.func.vmap(functional_call)`` over the template: the definition.
``forward`` computes the same thing layer by layer, one operation per layer over the whole
population (a grouped convolution or im2col patches through the indexed matmul, a batched
matmul or the indexed matmul kernel), reading every network's weights in place from a
per-slot layout (``SlotParams``). It is tested equal to ``reference``. What a slot derives
from its member's parameters when it takes them (``prepare``: virtual batch normalisation's
moments, folded into the weights) is computed once per episode, not per step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from neuroevo.kernels import REFERENCE, Kernels, indexed_matmul, perturb_into
from neuroevo.lowrank import LowRank
from neuroevo.policy.lowrank import LowRankBatch, LowRankSlots
from neuroevo.policy.nets import MLP, AtariNet, inputs, same_pad
from neuroevo.policy.spec import ParamSpec
from neuroevo.policy.vbn import fold, moments


class SlotParams:
    """Per-slot parameter storage: one contiguous ``[rows, *shape]`` tensor per parameter.

    The networks being computed occupy rows ``[0, count)``, so ``prefix(count)`` is a set of
    views: the forward pass reads weights in place and never gathers them (a gather of a
    few large nets costs more than their forward pass on a CPU). When a slot falls idle for
    good, the evaluator moves the last computed row into its place (``move``): one copy per
    idle event instead of one per step.
    """

    def __init__(self, spec: ParamSpec, num_rows: int, device=None,
                 kernels: Kernels = REFERENCE):
        self.spec, self.num_rows, self.kernels = spec, num_rows, kernels
        self.device = torch.device(device or "cpu")
        self.layers = {e.name: torch.zeros(num_rows, *e.shape, device=self.device)
                       for e in spec}

    def load(self, row: int, flat: torch.Tensor) -> None:
        for e in self.spec:
            self.layers[e.name][row].copy_(flat[e.slice].view(e.shape))

    def load_perturbed(self, row: int, base: torch.Tensor, noise: torch.Tensor, offset: int,
                       scale: float) -> None:
        """Row ``row`` = ``base + noise[offset:offset+D] * scale``, decoded straight into each
        layer's storage (one fused kernel per layer on a GPU; equal to ``load(decode())``)."""
        for e in self.spec:
            perturb_into(self.layers[e.name][row], base[e.slice], noise,
                         offset + e.slice.start, scale, self.kernels.backend)

    def move(self, src: int, dst: int) -> None:
        for t in self.layers.values():
            t[dst].copy_(t[src])

    def prefix(self, count: int) -> dict[str, torch.Tensor]:
        """``{name: [count, *shape]}`` views of rows ``[0, count)``."""
        return {name: t[:count] for name, t in self.layers.items()}


def batched_dense(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                  kernels: Kernels = REFERENCE) -> torch.Tensor:
    """``x[P, in] @ w[P, out, in]^T + b[P, out]``: the indexed matmul kernel (a weight stream
    read once) with the Triton backend, one batched matmul with the reference."""
    if kernels.backend == "triton":
        return indexed_matmul(x, w, torch.arange(x.shape[0], device=x.device), b,
                              backend="triton")
    return torch.baddbmm(b.unsqueeze(1), x.unsqueeze(1), w.transpose(1, 2)).squeeze(1)


def batched_conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, kernel: int,
                 stride: int, kernels: Kernels = REFERENCE) -> torch.Tensor:
    """``x[P, C, H, W]`` through ``w[P, O, C, k, k]``, ``b[P, O]`` (SAME padding) ->
    ``[P, O, H', W']``: network i's filters on input i (``kernels.conv`` picks the method)."""
    p, o = w.shape[:2]
    xp = same_pad(x, kernel, stride)
    if kernels.conv == "grouped":  # one grouped convolution: P filter banks on P inputs
        y = F.conv2d(xp.reshape(1, -1, *xp.shape[-2:]), w.reshape(-1, *w.shape[2:]),
                     b.reshape(-1), stride=stride, groups=p)
        return y.view(p, o, *y.shape[-2:])
    cols = patches(xp, kernel, stride)  # [P, L, C*k*k]
    flat = w.reshape(p, o, -1)  # a view of the slot rows; (C, kh, kw) order as in patches
    if kernels.backend == "triton":
        y = torch.empty(p, o, cols.shape[1], device=x.device)
        # The kernel writes through the transposed view: channels-first with no copy.
        indexed_matmul(cols, flat, torch.arange(p, device=x.device), b,
                       out=y.transpose(1, 2), backend="triton")
    else:
        y = torch.baddbmm(b.unsqueeze(2), flat, cols.transpose(1, 2))
    side = [(n - kernel) // stride + 1 for n in xp.shape[-2:]]
    return y.view(p, o, *side)


def patches(x: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    """``x[P, C, H, W]`` -> ``[P, L, C*k*k]``: each output pixel's patch, ``(C, kh, kw)``
    ordered as ``F.unfold``'s, in one strided copy. ``F.unfold`` itself launches one kernel
    per image on CUDA: at a population of 1,000 those launches took most of an H200's
    forward pass (2026-12-04)."""
    p, c = x.shape[:2]
    windows = x.unfold(2, kernel, stride).unfold(3, kernel, stride)  # [P, C, oh, ow, k, k]
    return windows.permute(0, 2, 3, 1, 4, 5).reshape(p, -1, c * kernel * kernel)


class BatchedPolicy:
    """Forward passes of a population of networks that share a template, through ``kernels``
    (``neuroevo.kernels.select(device)``; the pure-torch reference by default)."""

    def __init__(self, template: nn.Module, spec: ParamSpec, kernels: Kernels = REFERENCE,
                 reference_batch: torch.Tensor | None = None, lowrank: LowRank | None = None):
        self.template, self.spec, self.kernels = template, spec, kernels
        self.vbn = bool(getattr(template, "vbn", False))
        # Low-rank slots for populations perturbed at low rank; with VBN (moments folded
        # into each slot's weights) members are materialised instead.
        self.lowrank = lowrank if not self.vbn and isinstance(template, (MLP, AtariNet)) else None
        if self.vbn and reference_batch is None:
            raise ValueError("a VBN net needs its reference batch (neuroevo.policy.vbn)")
        self.reference_batch = reference_batch  # [B, *obs] on the template's device
        self._ref = vmap(lambda p, x: functional_call(template, p, (x.unsqueeze(0),))[0])

    @property
    def num_params(self) -> int:
        return self.spec.num_params

    def prepare(self, layers: dict[str, torch.Tensor], row: int) -> None:
        """After a member's parameters were loaded into ``row`` of ``layers`` (``{name:
        [rows, *shape]}``, ``SlotParams.layers``): what the slot derives from them. With
        VBN, its moments over the reference batch, folded into the row's weights."""
        if self.vbn:
            fold(self.template, {k: v[row] for k, v in layers.items()}, self.reference_batch)

    @torch.no_grad()
    def reference(self, params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """``[P, D]`` flat parameters and ``[P, ...]`` observations -> ``[P, A]`` outputs."""
        if self.vbn:  # the template's own VBN path, one network at a time
            out = []
            for p, x in zip(params, obs, strict=True):
                w = self.spec.unflatten(p)
                buffers = self.template.moment_buffers(
                    moments(self.template, w, self.reference_batch))
                out.append(functional_call(self.template, {**w, **buffers}, (x[None],))[0])
            return torch.stack(out)
        return self._ref(self.spec.unflatten(params), obs)

    def slot_storage(self, num_rows: int, device=None) -> SlotParams | LowRankSlots:
        """Slot storage for this policy's populations: factors and shared bases with
        ``lowrank``, else per-slot weights."""
        if self.lowrank is not None:
            return LowRankSlots(self.spec, self.lowrank, num_rows, device)
        return SlotParams(self.spec, num_rows, device, self.kernels)

    @torch.no_grad()
    def forward(self, layers: dict[str, torch.Tensor] | LowRankBatch, obs: torch.Tensor
                ) -> torch.Tensor:
        """``{name: [P, *shape]}`` (``SlotParams.prefix``, ``spec.unflatten``) or a
        ``LowRankBatch`` (``LowRankSlots.prefix``) -> ``[P, A]``."""
        t = self.template
        if isinstance(layers, LowRankBatch):
            return self._forward_lowrank(layers, obs)
        if obs.shape[0] == 1 and not self._batch_invariant():
            # A batch of one takes other conv/matmul kernels whose rounding differs; a batch
            # of two keeps a network's actions independent of how many slots are active.
            two = {name: v.expand(2, *v.shape[1:]).contiguous() for name, v in layers.items()}
            return self.forward(two, obs.expand(2, *obs.shape[1:]))[:1]
        if not isinstance(t, (AtariNet, MLP)):
            return self._ref(layers, obs)
        x = inputs(t, obs)  # [P, C, H, W] frames or [P, *obs] vectors
        for layer in t.layers:  # a dense layer reads each member's input flattened
            w, b = layers[layer.weight], layers[layer.bias]
            x = layer.activate(batched_conv(x, w, b, *layer.conv, self.kernels) if layer.conv
                               else batched_dense(x.flatten(1), w, b, self.kernels))
        return x

    def _forward_lowrank(self, batch: LowRankBatch, obs: torch.Tensor) -> torch.Tensor:
        t = self.template
        x = inputs(t, obs)
        for layer in t.layers:
            x = layer.activate(
                batch.conv(same_pad(x, *layer.conv), layer.weight, layer.bias, layer.conv[1])
                if layer.conv else batch.dense(x.flatten(1), layer.weight, layer.bias))
        return x

    def _batch_invariant(self) -> bool:
        """Whether every layer runs the kernels, which compute each row on its own."""
        if self.kernels.backend != "triton":
            return False
        return not isinstance(self.template, AtariNet) or self.kernels.conv == "im2col"

    def slot_layers(self, params: torch.Tensor) -> dict[str, torch.Tensor]:
        """``[P, D]`` flat parameters as ``forward`` takes them: per-layer tensors strided as
        ``SlotParams`` rows are (copies of ``spec.unflatten``'s views; with VBN, prepared:
        ``prepare``), or, with ``lowrank``, low-rank slots holding them: the evaluator's
        layouts, so a replay equals its episode."""
        if self.lowrank is not None:
            slots = self.slot_storage(params.shape[0], params.device)
            for row in range(params.shape[0]):
                slots.load(row, params[row])
            return slots.prefix(params.shape[0])
        # Per-layer tensors laid out as slot rows are: a kernel specialises on its row strides,
        # so the same network through other strides (a flat row of D, or a batch of one, whose
        # row stride torch sets freely) could sum in another order on a GPU. VBN folds its
        # moments in place, so it always takes copies.
        layers = {k: v.clone(memory_format=torch.contiguous_format) if self.vbn
                  else v.contiguous() for k, v in self.spec.unflatten(params).items()}
        if self.vbn:
            for row in range(params.shape[0]):
                self.prepare(layers, row)
        return layers

    def __call__(self, params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Flat ``[P, D]`` parameters -> ``[P, A]`` outputs through the fast path."""
        return self.forward(self.slot_layers(params), obs)
