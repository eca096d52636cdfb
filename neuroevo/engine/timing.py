"""Seconds per pipeline stage, right on a GPU as on a CPU.

Host stages (``env_wait``, ``reset``, ``bookkeeping``) are host intervals; ``env_wait`` is
the driver's time on its envs: waiting for a step, or sending one (where an evaluator with
one subset steps its MuJoCo envs itself). Device stages
(``decode``, ``h2d``, ``forward``, ``d2h``) on CUDA are timed by CUDA events recorded on the
stream at the stage's bounds: kernels run asynchronously, so a host timer would charge a
stage's GPU time to the next point that waits for the GPU (the copy of the actions back).
Events are read once complete (``query``) every few hundred, and the rest at the end of
the evaluation (``totals``), so timing adds no synchronisation to the pipeline.
"""

from __future__ import annotations

import time

import torch

STAGES = ("env_wait", "reset", "decode", "h2d", "forward", "d2h", "bookkeeping")
DEVICE_STAGES = ("decode", "h2d", "forward", "d2h")


class StageClock:
    """``stages``: the stages it reports (others add on when first timed); ``device_stages``:
    those timed by CUDA events on a GPU."""

    def __init__(self, device: torch.device, stages: tuple[str, ...] = STAGES,
                 device_stages: tuple[str, ...] = DEVICE_STAGES):
        self.seconds = dict.fromkeys(stages, 0.0)
        self.device_stages = device_stages
        self.events = device.type == "cuda"
        self._pending: list = []  # (stage, start event, end event), not yet read

    def mark(self):
        """A device-stage bound: a CUDA event recorded on the current stream, or the host
        time on a CPU."""
        if not self.events:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def add(self, stage: str, start, end) -> None:
        """Add the time between two bounds: ``mark()``s for a device stage, host times
        (``time.perf_counter()``) for a host stage."""
        if self.events and stage in self.device_stages:
            self._pending.append((stage, start, end))
            if len(self._pending) >= 256:
                self._read(wait=False)
        else:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + end - start

    def _read(self, wait: bool) -> None:
        keep = []
        for stage, start, end in self._pending:
            if wait:
                end.synchronize()
            elif not end.query():
                keep.append((stage, start, end))
                continue
            self.seconds[stage] = (self.seconds.get(stage, 0.0)
                                   + start.elapsed_time(end) / 1000.0)
        self._pending = keep

    def totals(self) -> dict[str, float]:
        """Seconds per stage of everything added, waiting for the last events."""
        self._read(wait=True)
        return dict(self.seconds)
