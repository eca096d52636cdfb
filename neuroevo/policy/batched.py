"""Population forward passes: ``(params, obs[P, ...]) -> outputs[P, A]``, P different networks.

``reference`` is ``torch.func.vmap(functional_call)`` over the template: the definition.
``forward`` computes the same thing layer by layer with one grouped convolution / one
batched matmul per layer over the whole population, reading every network's weights in
place from a per-slot layout (``SlotParams``). It is tested equal to ``reference``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from neuroevo.kernels import backend, indexed_matmul, perturb_into
from neuroevo.policy.nets import MLP, AtariNet, same_pad
from neuroevo.policy.spec import ParamSpec


class SlotParams:
    """Per-slot parameter storage: one contiguous ``[rows, *shape]`` tensor per parameter.

    The networks being computed occupy rows ``[0, count)``, so ``prefix(count)`` is a set of
    views: the forward pass reads weights in place and never gathers them (a gather of a
    few large nets costs more than their forward pass on a CPU). When a slot falls idle for
    good, the evaluator moves the last computed row into its place (``move``): one copy per
    idle event instead of one per step.
    """

    def __init__(self, spec: ParamSpec, num_rows: int, device=None):
        self.spec, self.num_rows = spec, num_rows
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
                                 offset + e.slice.start, scale)

    def move(self, src: int, dst: int) -> None:
        for t in self.layers.values():
            t[dst].copy_(t[src])

    def prefix(self, count: int) -> dict[str, torch.Tensor]:
        """``{name: [count, *shape]}`` views of rows ``[0, count)``."""
        return {name: t[:count] for name, t in self.layers.items()}


def _dense(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x[P, in] @ w[P, out, in]^T + b[P, out]``: the indexed matmul kernel on a GPU (a
    weight stream read once), one batched matmul on a CPU."""
    if backend(x) == "triton":
        return indexed_matmul(x, w, torch.arange(x.shape[0], device=x.device), b)
    return torch.baddbmm(b.unsqueeze(1), x.unsqueeze(1), w.transpose(1, 2)).squeeze(1)


class BatchedPolicy:
    """Forward passes of a population of networks that share a template."""

    def __init__(self, template: nn.Module, spec: ParamSpec):
        self.template, self.spec = template, spec
        self._ref = vmap(lambda p, x: functional_call(template, p, (x.unsqueeze(0),))[0])

    @property
    def num_params(self) -> int:
        return self.spec.num_params

    @torch.no_grad()
    def reference(self, params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """``[P, D]`` flat parameters and ``[P, ...]`` observations -> ``[P, A]`` outputs."""
        return self._ref(self.spec.unflatten(params), obs)

    @torch.no_grad()
    def forward(self, layers: dict[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
        """``{name: [P, *shape]}`` (``SlotParams.prefix``, ``spec.unflatten``) -> ``[P, A]``."""
        if obs.shape[0] == 1:
            # A batch of one takes other conv/matmul kernels whose rounding differs; a batch
            # of two keeps a network's actions independent of how many slots are active.
            two = {name: v.expand(2, *v.shape[1:]).contiguous() for name, v in layers.items()}
            return self.forward(two, obs.expand(2, *obs.shape[1:]))[:1]
        t = self.template
        if isinstance(t, AtariNet):
            x = obs.float() / 255.0  # [P, C, H, W]
            p = x.shape[0]
            for i, (k, s) in enumerate(t.kernels):
                w, b = layers[f"convs.{i}.weight"], layers[f"convs.{i}.bias"]
                # One grouped convolution runs P different filter banks on P inputs.
                xp = same_pad(x, k, s)  # [P, C, H', W']
                x = F.conv2d(xp.reshape(1, -1, *xp.shape[-2:]), w.reshape(-1, *w.shape[2:]),
                             b.reshape(-1), stride=s, groups=p)
                x = F.relu(x).reshape(p, w.shape[1], *x.shape[-2:])
            x = F.relu(_dense(x.flatten(1), layers["fc.weight"], layers["fc.bias"]))
        elif isinstance(t, MLP):
            x = obs.float().flatten(1)
            for i in range(len(t.hidden)):
                x = torch.tanh(_dense(x, layers[f"hidden.{i}.weight"], layers[f"hidden.{i}.bias"]))
        else:
            return self._ref(layers, obs)
        return _dense(x, layers["out.weight"], layers["out.bias"])

    def __call__(self, params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Flat ``[P, D]`` parameters -> ``[P, A]`` outputs through the fast path."""
        return self.forward(self.spec.unflatten(params), obs)
