"""Virtual batch normalisation (Salimans et al. 2016 and 2017; Uber's ``ModelVirtualBN``).

OpenAI-ES on Atari normalises each hidden layer of the small net with statistics of a fixed
reference batch instead of the batch being computed: a member's pre-activations ``y`` of a
hidden layer become ``(y - mean) * inv_std + b``, where ``mean`` and ``inv_std =
1 / sqrt(var + 1e-3)`` are that member's moments over the reference batch (over frames and
pixels for a convolution, over frames for the dense layer; the variance biased, as
``tf.nn.moments``), and ``b`` is a per-channel bias of the genome (the layer's ``bias``;
there is no bias before the normalisation and no scale). As in Uber's code, the moments are
computed once, when a member is loaded into a slot, by one pass of the reference batch
through that member's network in which each layer is normalised by its own moments.

Since the normalisation is affine and per channel, a slot keeps it folded into its weights:
``w' = w * inv_std`` (per output channel) and ``b' = b - mean * inv_std``. The population
forward pass is then the plain one (``BatchedPolicy.forward``, every kernel), and a slot
costs no more memory than without VBN.
"""

from __future__ import annotations

import torch
from torch.func import functional_call

REFERENCE_SIZE = 128  # frames in the reference batch (Uber's es.py: get_ref_batch(env, 128))


def moments(template, weights: dict[str, torch.Tensor], batch: torch.Tensor
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(mean, inv_std)`` per hidden layer of one network (``weights``: its named
    parameters) over the reference ``batch`` ``[B, *obs]``."""
    return functional_call(template, weights, (batch,), {"calibrate": True})


@torch.no_grad()
def fold(template, weights: dict[str, torch.Tensor], batch: torch.Tensor) -> None:
    """Fold one network's VBN into its hidden layers' ``weights`` in place (views of a
    slot's rows, raw genome values on entry): afterwards the plain forward of ``weights``
    is the VBN network's."""
    for name, (mean, inv) in zip(template.normalised, moments(template, weights, batch),
                                 strict=True):
        w, b = weights[f"{name}.weight"], weights[f"{name}.bias"]
        b.sub_(mean * inv)
        w.mul_(inv.view(-1, *[1] * (w.dim() - 1)))
