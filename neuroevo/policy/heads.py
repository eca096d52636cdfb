"""Network outputs to env actions, in one place: the argmax of the logits for discrete
actions, an argmax over each choice's own logits for multi-discrete ones; for a box, the
outputs (plus Gaussian training noise, OpenAI-ES on MuJoCo) clipped to its bounds. The
engine, ``neuroevo play`` and exported policies all act through these."""

from __future__ import annotations

import numpy as np
import torch

from neuroevo.spaces import ActionSpace


def to_actions(out: torch.Tensor, space: ActionSpace, noise: np.ndarray | None = None,
               rows: np.ndarray | None = None) -> np.ndarray:
    """``[N, outputs]`` network outputs -> ``[N, *space.shape]`` actions (int32, or float32
    for a box); ``noise`` (box only) is added before clipping: ``[N, dims]``, or
    ``[len(rows), dims]`` for the ``rows`` that get it (in float64 either way, so a row's
    action does not depend on which other rows are noisy)."""
    if not space.box:
        return act_tensor(out, space).cpu().numpy().astype(np.int32)  # sync: the envs act
    chosen = out.cpu().numpy()  # sync: as above
    if noise is not None:
        if rows is None:
            chosen = chosen + noise
        else:
            chosen = chosen.astype(np.float64)
            chosen[rows] += noise
    low, high = space.bounds()
    return np.clip(chosen, low, high).astype(np.float32)


def act_tensor(out: torch.Tensor, space: ActionSpace) -> torch.Tensor:
    """``to_actions`` without noise, as tensors (for exported policies)."""
    if space.discrete:
        return out.argmax(-1)
    if space.nvec is not None:
        return torch.stack([c.argmax(-1) for c in out.split(space.nvec, -1)], -1)
    low, high = (torch.as_tensor(b, dtype=out.dtype, device=out.device) for b in space.bounds())
    return torch.maximum(torch.minimum(out, high), low)
