"""Slots of a low-rank population and their forward pass (EGGROLL, Sarkar et al. 2025,
arXiv 2511.16652): a slot holds its member's factors, not a copy of its weights.

A member is ``base + scale * perturbation(seed)`` (``neuroevo.lowrank``): the base is the
centre (ES) or the member's parent (GA), materialised once and shared by the slots that use
it. Per matrix block a slot holds ``A [out, r]``, ``B [inner, r]`` (stored as its transpose)
and its scale; per 1-D
block (biases) its own perturbed values. A dense layer is then, for the rows of each base,

    y = x @ W_base.T + scale * (x @ B) @ A.T + b

so a forward pass reads each base's weights once, not every member's. The base products are
GEMMs over chunks of exactly ``CHUNK`` rows (idle rows zero): a GEMM's rounding depends on
its number of rows (measured on our CPUs: from 4 rows on it differs from 2 or 3), never on
a row's position or neighbours, so a fixed row count keeps a network's outputs independent
of how many slots run and of the layout. The corrections are elementwise products and
per-row sums (``mix``), whose rounding depends on no other row. All of this is measured on
the CPU; on CUDA the kernels' choices by batch size are a GPU check still to run. A conv layer is
the base convolution plus the correction as a grouped convolution (r filters per row, B as
``[r, C, kh, kw]``) and a 1x1 mix with A, both in chunks of ``CHUNK`` rows too. MLPs and
the image nets without VBN have this path (VBN folds moments into each slot's weights:
those members are materialised, ``SlotParams``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from neuroevo.lowrank import LowRank
from neuroevo.policy.spec import ParamSpec

CHUNK = 16  # rows per base GEMM, whatever the number of running rows


class LowRankSlots:
    """Per-slot factors and scales, per-slot biases, and the shared bases they refer to.

    ``load_lowrank(row, key, base, factors, scale)`` gives a row its member; ``key`` names
    the base (the ES decoder, a GA parent's genome): rows with equal keys share one copy.
    ``load(row, flat)`` takes a member given as full parameters (a base of its own, scale 0).
    Rows ``[0, count)`` are the running networks, as ``SlotParams``; ``move`` keeps them so.
    """

    def __init__(self, spec: ParamSpec, lowrank: LowRank, num_rows: int, device=None):
        self.spec, self.lowrank, self.num_rows = spec, lowrank, num_rows
        self.device = torch.device(device or "cpu")
        self.blocks = list(zip(spec, lowrank.blocks, strict=True))
        z = dict(device=self.device)
        self.a = {e.name: torch.zeros(num_rows, b.out, b.rank, **z) for e, b in self.blocks
                  if b.rank}
        self.b = {e.name: torch.zeros(num_rows, b.rank, b.inner, **z) for e, b in self.blocks
                  if b.rank}  # B transposed: each factor's column contiguous
        self.vectors = {e.name: torch.zeros(num_rows, *e.shape, **z) for e, b in self.blocks
                        if not b.rank}
        self.scale = torch.zeros(num_rows, **z)  # [rows] scale / sqrt(r) of the matrix terms
        self.key: list = [None] * num_rows  # [rows] the base each row uses
        self.bases: dict = {}  # key -> [refs, {name: base tensor}]

    @property
    def layers(self) -> dict:
        """No per-row weights to prepare (``BatchedPolicy.prepare``): VBN is not supported."""
        return {}

    def _use(self, row: int, key, base: torch.Tensor) -> None:
        self._release(row)
        if key not in self.bases:
            flat = base.to(self.device, torch.float32)
            self.bases[key] = [0, {e.name: flat[e.slice].view(e.shape) for e in self.spec}]
        self.bases[key][0] += 1
        self.key[row] = key

    def _release(self, row: int) -> None:
        key, self.key[row] = self.key[row], None
        if key is not None:
            self.bases[key][0] -= 1
            if not self.bases[key][0]:
                del self.bases[key]

    def load_lowrank(self, row: int, key, base: torch.Tensor, factors: list, scale: float
                     ) -> None:
        """Row ``row`` = ``base + scale * perturbation``, ``factors`` its per-block
        ``(A, B)`` / ``(v,)`` (``LowRank.factors``)."""
        self._use(row, key, base)
        bases = self.bases[key][1]
        for (e, b), f in zip(self.blocks, factors, strict=True):
            if b.rank:
                self.a[e.name][row].copy_(f[0])
                self.b[e.name][row].copy_(f[1].T)
            else:
                v = self.vectors[e.name][row]
                torch.add(bases[e.name], f[0].view(e.shape), alpha=scale, out=v)
        self.scale[row] = scale * self.lowrank.scale

    def load(self, row: int, flat: torch.Tensor) -> None:
        self._use(row, object(), flat.clone())  # a key of its own: no other row shares it
        bases = self.bases[self.key[row]][1]
        for e, b in self.blocks:
            if not b.rank:
                self.vectors[e.name][row].copy_(bases[e.name])
        self.scale[row] = 0.0

    def move(self, src: int, dst: int) -> None:
        for t in (*self.a.values(), *self.b.values(), *self.vectors.values(), self.scale):
            t[dst].copy_(t[src])
        self._release(dst)
        self.key[dst], self.key[src] = self.key[src], None

    def prefix(self, count: int) -> LowRankBatch:
        return LowRankBatch(self, count)


class LowRankBatch:
    """Rows ``[0, count)`` of ``LowRankSlots``, as ``BatchedPolicy.forward`` takes them."""

    def __init__(self, slots: LowRankSlots, count: int):
        self.slots, self.count = slots, count
        groups: dict = {}
        for row in range(count):
            groups.setdefault(slots.key[row], []).append(row)
        device = slots.device
        # (base weights, rows using them or None for all rows)
        self.groups = [(slots.bases[k][1], None if len(rows) == count else
                        torch.tensor(rows, device=device)) for k, rows in groups.items()]

    def dense(self, x: torch.Tensor, name: str, bias: str) -> torch.Tensor:
        """``x[count, in]`` through the rows' dense layer ``name`` (weights ``[out, in]``)."""
        s = self.slots
        out = s.a[name].shape[1]
        y = torch.empty(self.count, out, device=x.device)
        for bases, rows in self.groups:
            xs = x if rows is None else x.index_select(0, rows)
            prod = chunked_mm(xs, bases[name])
            if rows is None:
                y = prod
            else:
                y.index_copy_(0, rows, prod)
        n = self.count
        t = (x.unsqueeze(1) * s.b[name][:n]).sum(2) * s.scale[:n, None]  # [n, r]
        return y + mix(s.a[name][:n], t) + s.vectors[bias][:n]

    def conv(self, x: torch.Tensor, name: str, bias: str, stride: int) -> torch.Tensor:
        """``x[count, C, H, W]`` (padded already) through the rows' conv layer ``name``
        (weights ``[O, C, k, k]``, perturbed as ``[O, C*k*k]``): the base convolution, plus
        the correction as a grouped convolution with r filters per row (``B`` as
        ``[r, C, k, k]``) and a 1x1 mix with ``A``."""
        s, n = self.slots, self.count
        y = None
        for bases, rows in self.groups:
            xs = x if rows is None else x.index_select(0, rows)
            prod = chunked(xs, lambda chunk, w=bases[name]: F.conv2d(chunk, w, stride=stride))
            if rows is None:
                y = prod
            else:
                if y is None:
                    y = x.new_empty(n, *prod.shape[1:])
                y.index_copy_(0, rows, prod)
        c, k = x.shape[1], s.spec[name].shape[-1]
        r = s.b[name].shape[1]
        xs = padded(x)
        filters = padded(s.b[name][:n].reshape(n, r, c, k, k))
        t = torch.cat([F.conv2d(xs[lo:lo + CHUNK].reshape(1, CHUNK * c, *x.shape[2:]),
                                filters[lo:lo + CHUNK].reshape(CHUNK * r, c, k, k),
                                stride=stride, groups=CHUNK).view(CHUNK, r, -1)
                       for lo in range(0, len(xs), CHUNK)])[:n]  # [n, r, L]
        t = t * s.scale[:n, None, None]
        correction = mix(s.a[name][:n], t).view(y.shape)  # [n, O, H', W']
        return y + correction + s.vectors[bias][:n, :, None, None]


def mix(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``sum_j a[:, :, j] * t[:, j]`` for ``a [n, out, r]`` and ``t [n, r, ...]``: elementwise
    products added in a fixed order. A batched matmul would do it in one call, but its
    rounding can change with the number of rows (measured: ``x @ B`` per row, for inner
    sizes from 2592 on)."""
    shape = (*a.shape[:2], *([1] * (t.dim() - 2)))
    out = a[:, :, 0].reshape(shape) * t[:, None, 0]
    for j in range(1, a.shape[2]):
        out = out + a[:, :, j].reshape(shape) * t[:, None, j]
    return out


def padded(x: torch.Tensor) -> torch.Tensor:
    """``x`` with zero rows appended up to a multiple of ``CHUNK`` rows."""
    extra = -x.shape[0] % CHUNK
    return torch.cat([x, x.new_zeros(extra, *x.shape[1:])]) if extra else x


def chunked(x: torch.Tensor, op) -> torch.Tensor:
    """``op`` over ``x``'s rows in chunks of exactly ``CHUNK`` (the last padded with zeros),
    so that each row's rounding is the same whatever the number of rows is."""
    xs = padded(x)
    return torch.cat([op(xs[k:k + CHUNK]) for k in range(0, len(xs), CHUNK)])[:x.shape[0]]


def chunked_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x[n, in] @ w[out, in].T`` as GEMMs of exactly ``CHUNK`` rows."""
    return chunked(x, lambda chunk: chunk @ w.T)
