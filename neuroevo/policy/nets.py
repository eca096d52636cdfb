"""Network templates: the Deep GA Atari nets and an MLP for vector observations.

Templates are ordinary ``nn.Module``s used for their structure only (shapes, and the
reference forward through ``torch.func.functional_call``); their own weights are never used.
Initialisation follows Such et al. 2017: fan-in scaled normal weights (std 1/sqrt(fan_in)),
output layer std 0.1 (applied to the normalised column scale), zero biases.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from neuroevo.errors import ConfigError, UnknownName
from neuroevo.policy.spec import ParamSpec

VBN_EPS = 1e-3  # Uber's ModelVirtualBN: 1 / sqrt(var + 1e-3)


def same_pad(x: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    """TensorFlow's SAME padding (extra pixel at the bottom/right), as in the original nets."""
    size = x.shape[-1]
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    lo, hi = total // 2, total - total // 2
    return F.pad(x, (lo, hi, lo, hi))


@dataclass(frozen=True)
class Layer:
    """One layer of a template, as every forward pass reads it (the template's own, the
    batched one, the low-rank one): the architecture is described here once, by the
    template's ``layers``, in order."""

    name: str  # its parameters' prefix: "convs.0", "fc", "hidden.1", "out"
    conv: tuple[int, int] | None  # (kernel, stride) of a SAME-padded convolution; None: dense
    act: str  # "relu", "tanh" or "" (the output: none)

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        return ACTIVATIONS[self.act](x)

    @property
    def weight(self) -> str:
        return f"{self.name}.weight"

    @property
    def bias(self) -> str:
        return f"{self.name}.bias"


ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh, "": lambda x: x}


def inputs(template: nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """Observations as the first layer takes them: frames (uint8) scaled to [0, 1], vectors
    as float32."""
    return obs.float() / 255.0 if isinstance(template, AtariNet) else obs.float()


def flat(x: torch.Tensor, layer: Layer, previous: Layer | None) -> torch.Tensor:
    """``x`` for ``layer``: a dense layer after a convolution takes its ``[C, H, W]``
    flattened (the leading dims kept, so one network and a batch read the same)."""
    return x.flatten(-3) if layer.conv is None and previous is not None and \
        previous.conv is not None else x


class AtariNet(nn.Module):
    """Conv stack with SAME padding + one hidden dense layer; input uint8 ``[4, 84, 84]``.

    ``vbn``: virtual batch normalisation after each hidden layer (``neuroevo.policy.vbn``):
    a hidden layer's ``bias`` is then added after the normalisation, whose moments are the
    buffers ``vbn_mean_k`` / ``vbn_inv_k`` (set by ``calibrate``)."""

    def __init__(self, convs: tuple[tuple[int, int, int], ...], hidden: int, num_actions: int,
                 in_channels: int = 4, size: int = 84, vbn: bool = False):
        super().__init__()
        self.layers = (*(Layer(f"convs.{i}", (k, s), "relu") for i, (_, k, s) in
                         enumerate(convs)), Layer("fc", None, "relu"), Layer("out", None, ""))
        layers, c = [], in_channels
        for out, k, s in convs:
            layers.append(nn.Conv2d(c, out, k, s))
            c, size = out, -(-size // s)
        self.convs = nn.ModuleList(layers)
        self.fc = nn.Linear(c * size * size, hidden)
        self.out = nn.Linear(hidden, num_actions)
        self.vbn = vbn
        self.normalised = [f"convs.{i}" for i in range(len(convs))] + ["fc"] if vbn else []
        if vbn:
            widths = [o for o, _, _ in convs] + [hidden]
            zeros = [(torch.zeros(w), torch.ones(w)) for w in widths]
            for name, t in self.moment_buffers(zeros).items():
                self.register_buffer(name, t, persistent=False)

    @staticmethod
    def moment_buffers(found: list[tuple[torch.Tensor, torch.Tensor]]
                       ) -> dict[str, torch.Tensor]:
        """VBN moments ``[(mean, inv_std), ...]`` per hidden layer as the module's buffers
        by name (what ``functional_call`` takes to run a network at given moments)."""
        return {f"vbn_{kind}_{k}": t for k, pair in enumerate(found)
                for kind, t in zip(("mean", "inv"), pair, strict=True)}

    def forward(self, obs: torch.Tensor, calibrate: bool = False):
        """Outputs ``[B, A]``; with ``calibrate`` (VBN), ``obs`` is the reference batch, each
        hidden layer is normalised by its own moments over it, and those moments are
        returned instead: ``[(mean, inv_std), ...]`` per hidden layer."""
        found = [] if calibrate else None
        x, previous = inputs(self, obs), None
        for i, layer in enumerate(self.layers[:-1]):
            x, module = flat(x, layer, previous), self.get_submodule(layer.name)
            if layer.conv is not None:
                x = same_pad(x, *layer.conv)
            if self.vbn:  # the bias goes in after the normalisation
                y = (F.conv2d(x, module.weight, stride=layer.conv[1]) if layer.conv else
                     F.linear(x, module.weight))
                x = layer.activate(self._normalise(i, y, module.bias, found))
            else:
                x = layer.activate(module(x))
            previous = layer
        if calibrate:
            return found
        out = self.layers[-1]
        return self.get_submodule(out.name)(flat(x, out, previous))

    def _normalise(self, k: int, y: torch.Tensor, bias: torch.Tensor, found: list | None):
        shape = (-1, 1, 1) if y.dim() == 4 else (-1,)  # per channel of [B, C, H, W] or [B, C]
        if found is not None:
            dims = [0, 2, 3] if y.dim() == 4 else [0]
            mean = y.mean(dims)
            found.append((mean, torch.rsqrt(y.var(dims, unbiased=False) + VBN_EPS)))
        mean, inv = found[-1] if found is not None else (getattr(self, f"vbn_mean_{k}"),
                                                         getattr(self, f"vbn_inv_{k}"))
        return (y - mean.view(shape)) * inv.view(shape) + bias.view(shape)

    @torch.no_grad()
    def calibrate(self, batch: torch.Tensor) -> None:
        """Set the VBN moments from a reference batch through this module's own weights."""
        for name, t in self.moment_buffers(self(batch, calibrate=True)).items():
            getattr(self, name).copy_(t)


class MLP(nn.Module):
    """Dense layers with tanh (OpenAI-ES's MuJoCo policy: 256-256 tanh)."""

    def __init__(self, obs_dim: int, hidden: tuple[int, ...], out_dim: int):
        super().__init__()
        dims = (obs_dim, *hidden)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.out = nn.Linear(dims[-1], out_dim)
        self.layers = (*(Layer(f"hidden.{i}", None, "tanh") for i in range(len(hidden))),
                       Layer("out", None, ""))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = inputs(self, obs)
        for layer in self.layers:
            x = layer.activate(self.get_submodule(layer.name)(x))
        return x


def fan_in_std(output_layer: str, output_std: float = 0.1):
    """Init stds for ``ParamSpec``: 1/sqrt(fan_in) weights, ``output_std`` scaling at the output."""
    def init_std(name: str, p: torch.Tensor) -> float:
        if name.endswith("bias"):
            return 0.0
        fan_in = math.prod(p.shape[1:])
        scale = output_std if name.startswith(output_layer) else 1.0
        return scale / math.sqrt(fan_in)
    return init_std


def normc(spec, flat: torch.Tensor, output_layer: str = "out",
          output_std: float = 0.01) -> torch.Tensor:
    """OpenAI-ES's MuJoCo initialisation (``normc_initializer`` of openai/evolution-strategies-
    starter, ``MujocoPolicy``) applied to ``flat``, raw standard-normal draws ``[D]`` laid out
    by ``spec`` (a ``ParamSpec``): each unit's incoming weights scaled to norm 1 in the hidden
    layers and to ``output_std`` in the output layer; biases zero. Returns a new vector."""
    out = flat.clone()
    for e in spec:
        view = out[e.slice].view(e.shape)
        if e.name.endswith("bias"):
            view.zero_()
            continue
        rows = view.reshape(e.shape[0], -1)  # torch's [out, in]: one row per unit
        rows.mul_((output_std if e.name.startswith(output_layer) else 1.0)
                  / rows.norm(dim=1, keepdim=True))
    return out


@dataclass(frozen=True)
class NetSpec:
    """A named architecture: how to build its template for an observation/action space."""

    name: str
    image: bool  # convolutions over stacked frames (the Atari nets), else an MLP
    convs: tuple[tuple[int, int, int], ...] = ()
    hidden: tuple[int, ...] = ()


NETS = {
    "large": NetSpec("large", True, ((32, 8, 4), (64, 4, 2), (64, 3, 1)), (512,)),
    "small": NetSpec("small", True, ((16, 8, 4), (32, 4, 2)), (256,)),
    "mlp": NetSpec("mlp", False, hidden=(256, 256)),
}


def build_template(net: str, obs_shape: tuple[int, ...], num_outputs: int,
                   hidden: tuple[int, ...] | None = None, vbn: bool = False,
                   ) -> tuple[nn.Module, ParamSpec]:
    """``(template, spec)`` for a named net; ``hidden`` overrides the MLP's layer sizes;
    ``vbn`` adds virtual batch normalisation to an Atari net (its output layer then starts
    at std 1.0 / sqrt(fan_in), as Uber's ``ModelVirtualBN``, not 0.1)."""
    if net not in NETS:
        raise UnknownName("network", net, NETS)
    ns = NETS[net]
    if vbn and not ns.image:
        raise ConfigError(f"net.vbn needs an image net (small or large), not {net!r}; "
                          "use --set net.vbn=false")
    if ns.image:
        module = AtariNet(ns.convs, ns.hidden[0], num_outputs, obs_shape[0], obs_shape[-1],
                          vbn=vbn)
    else:
        module = MLP(math.prod(obs_shape), tuple(hidden or ns.hidden), num_outputs)
    module.requires_grad_(False)
    return module, ParamSpec.from_module(module, fan_in_std("out", 1.0 if vbn else 0.1))
