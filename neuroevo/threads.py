"""Torch's intra-op threads, set for a block and restored after it."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block on ``n`` torch threads (0: as they are). OpenMP's setting is per
    thread, so this sets the calling thread's only."""
    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
