"""A run's policy as one safetensors file that any PyTorch program can load without pickle.

``policy.safetensors`` holds the network's named tensors (``module.state_dict()`` names),
the observation normaliser's ``obs_norm.mean`` / ``obs_norm.std`` when the run has one,
and JSON metadata: the architecture (net, observation shape, outputs, hidden sizes), the
action head (``discrete`` argmax, an argmax per choice of ``nvec``, or outputs clipped to
``[low, high]``, an infinite bound stored as null), the clip of the normalised observations
and the generation. ``load_policy`` rebuilds it as a module:

>>> # policy = load_policy("runs/ga-pong-.../policy.safetensors")
>>> # action = policy.act(torch.as_tensor(obs[None]))  # obs as the env gives it
"""

from __future__ import annotations

import json

import torch
from torch import nn

from neuroevo.errors import CheckpointError
from neuroevo.policy.heads import act_tensor
from neuroevo.policy.nets import build_template
from neuroevo.serial import first_line, loads_strict, read_file
from neuroevo.spaces import ActionSpace

FORMAT = "neuroevo.policy/1"


def policy_bytes(params: dict[str, torch.Tensor], arch: dict, generation: int,
                 obs_norm=None, reference_batch: torch.Tensor | None = None) -> bytes:
    """The file's bytes: ``params`` by name, ``arch`` (see ``Built.arch``), the normaliser,
    VBN's reference batch."""
    from safetensors.torch import save

    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in params.items()}
    if reference_batch is not None:
        tensors["vbn.reference_batch"] = reference_batch.cpu().contiguous()
    meta = {"format": FORMAT, "arch": json.dumps(arch, allow_nan=False),
            "generation": str(generation)}
    if obs_norm is not None:
        tensors["obs_norm.mean"] = obs_norm.mean.float().contiguous()
        tensors["obs_norm.std"] = obs_norm.std.float().contiguous()
        meta["obs_norm_clip"] = repr(float(obs_norm.clip))
    return save(tensors, metadata=meta)


class SavedPolicy(nn.Module):
    """The trained network with its observation normalisation and action head."""

    def __init__(self, net: nn.Module, arch: dict, mean=None, std=None, clip: float = 5.0):
        super().__init__()
        self.net, self.arch, self.clip = net, arch, clip
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Network outputs (logits or actions before clipping) for a batch ``[B, *obs]``."""
        if self.mean is not None:
            obs = ((obs.float() - self.mean) / self.std).clamp(-self.clip, self.clip)
        return self.net(obs)

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions as the engine takes them (``neuroevo.policy.heads.act_tensor``)."""
        return act_tensor(self(obs), ActionSpace.from_arch(self.arch))


POLICY_FIX = ("copy policy.safetensors again from the run directory that wrote it, or play "
              "that run with 'neuroevo play RUN_DIR', which reads its checkpoint")


def load_policy(path: str) -> SavedPolicy:
    """The policy in ``path``, read as JSON and raw tensors only (nothing is unpickled)."""
    meta, tensors = read_file(path, "neuroevo policy file", POLICY_FIX)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} has format {meta.get('format')!r}, not {FORMAT!r}, so "
                              f"it is not a neuroevo policy file; {POLICY_FIX}")
    try:
        arch = loads_strict(meta["arch"])
        ActionSpace.from_arch(arch)
        net, _ = build_template(arch["net"], tuple(arch["obs_shape"]), arch["num_outputs"],
                                tuple(arch["hidden"]) or None, vbn=arch.get("vbn", False))
        mean, std = tensors.pop("obs_norm.mean", None), tensors.pop("obs_norm.std", None)
        reference = tensors.pop("vbn.reference_batch", None)
        _check_shapes(path, tensors, net.state_dict())
        _check_values(path, tensors, mean, std, tuple(arch["obs_shape"]))
        net.load_state_dict(tensors)
        if getattr(net, "vbn", False):
            if reference is None:
                raise KeyError("vbn.reference_batch")
            net.calibrate(reference)
        clip = float(meta.get("obs_norm_clip", "5.0"))
    except (KeyError, ValueError, TypeError, AttributeError, RuntimeError) as e:
        raise CheckpointError(f"{path} does not describe a neuroevo policy ({first_line(e)}); "
                              f"{POLICY_FIX}") from None
    return SavedPolicy(net, arch, mean, std, clip).eval()


def _check_shapes(path: str, tensors: dict, expected: dict) -> None:
    """Refuse the first tensor the architecture needs and the file lacks or holds in another
    shape, then the first it holds and the architecture has no place for: one line, where
    ``load_state_dict`` lists every mismatch over several."""
    for name, want in expected.items():
        if name not in tensors:
            raise CheckpointError(f"{path} lacks tensor {name!r} (shape {tuple(want.shape)}) "
                                  f"that its architecture needs; {POLICY_FIX}")
        got = tensors[name]
        if tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(f"{path} holds tensor {name!r} in shape {tuple(got.shape)}, "
                                  f"and its architecture expects {tuple(want.shape)}; "
                                  f"{POLICY_FIX}")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise CheckpointError(f"{path} holds tensor {extra[0]!r}, which its architecture has "
                              f"no place for; {POLICY_FIX}")


def _check_values(path: str, tensors: dict, mean, std, obs_shape: tuple) -> None:
    """Refuse NaN or inf in a weight or in the normaliser, and a std <= 0, which would make
    every action NaN (or inf) without an error."""
    for name, tensor in tensors.items():
        if not torch.isfinite(tensor).all():
            raise CheckpointError(f"{path} holds NaN or inf in tensor {name!r}; {POLICY_FIX}")
    if (mean is None) != (std is None):
        name = "obs_norm.mean" if std is None else "obs_norm.std"
        raise CheckpointError(f"{path} holds {name} without the other half of the "
                              f"observation normaliser; {POLICY_FIX}")
    for name, tensor in (("obs_norm.mean", mean), ("obs_norm.std", std)):
        if tensor is None:
            continue
        if tuple(tensor.shape) != obs_shape:
            raise CheckpointError(f"{path} holds tensor {name!r} in shape "
                                  f"{tuple(tensor.shape)}, and its observations have shape "
                                  f"{obs_shape}; {POLICY_FIX}")
        if not torch.isfinite(tensor).all():
            raise CheckpointError(f"{path} holds NaN or inf in tensor {name!r}; {POLICY_FIX}")
    if std is not None and not (std > 0).all():
        raise CheckpointError(f"{path} holds a value <= 0 in tensor 'obs_norm.std' (a "
                              f"standard deviation is > 0); {POLICY_FIX}")
