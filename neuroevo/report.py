"""Report sinks at the edge, as training-driver callbacks: TensorBoard event files (when
tensorboard is installed) and the live progress line."""

from __future__ import annotations

import datetime
import time
from typing import TextIO

from neuroevo.loop import Budget, Callback, Totals
from neuroevo.metrics import SCALARS, live_line


class TensorBoard(Callback):
    """Scalars of every generation row, against emulator frames, in ``log_dir``.

    A no-op when tensorboard is not installed (``pip install tensorboard`` turns it on). On
    resume, events past the checkpoint (written before a crash) are purged: those at steps
    after ``resume_frames``, the step of the last checkpointed row, which is kept.
    """

    def __init__(self, log_dir: str, resume_frames: int = 0):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self.writer = None
            return
        # purge_step removes events at steps >= it: the kept row's step stays
        self.writer = SummaryWriter(log_dir, purge_step=resume_frames + 1 if resume_frames
                                    else None)

    def generation(self, row: dict, totals: Totals, history: list[dict]) -> None:
        if self.writer is None:
            return
        for key in SCALARS:
            if row.get(key) is not None:
                self.writer.add_scalar(key, row[key], global_step=row["frames"])
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Progress(Callback):
    """Each generation's line on ``stream``; with ``live`` (a terminal), also a line rewritten
    in place after every episode: episodes done, frames/s, best score so far, the budget's
    ETA."""

    def __init__(self, stream: TextIO, live: bool, budget: Budget, totals: Totals,
                 history: list[dict]):
        self.stream, self.live, self.budget, self.totals = stream, live, budget, totals
        self.best = max((r["fitness_max"] for r in history), default=float("-inf"))
        self.t0, self.frames = time.perf_counter(), 0

    def eta(self, fps: float) -> str:
        t = self.totals
        if self.budget.frames and fps > 0:
            left = (self.budget.frames - t.frames - self.frames) / fps
        elif self.budget.generations and t.generation > 0:
            left = (self.budget.generations - t.generation) * t.wall_time / t.generation
        else:
            return ""
        return f"  ETA {datetime.timedelta(seconds=int(max(left, 0)))}"

    def episode(self, done: int, total: int, score: float, frames: int) -> None:
        self.frames += frames
        self.best = max(self.best, score)
        if self.live:
            fps = self.frames / max(time.perf_counter() - self.t0, 1e-9)
            print(f"\r  gen {self.totals.generation}  episodes {done}/{total}  "
                  f"{fps:,.0f} frames/s  best {self.best:g}{self.eta(fps)}   ", end="",
                  file=self.stream, flush=True)

    def generation(self, row: dict, totals: Totals, history: list[dict]) -> None:
        self.t0, self.frames = time.perf_counter(), 0
        line = live_line(row) + (self.eta(row["fps"]) + " " * 8 if self.live else "")
        print(("\r" if self.live else "") + line, file=self.stream, flush=True)
