"""Report sinks at the edge: TensorBoard event files (when tensorboard is installed), the
live progress line with the budget's expected wall time, and the summary a run ends with."""

from __future__ import annotations

import datetime
import os
import time
from typing import TextIO

from neuroevo.loop import Budget, Callback, Totals
from neuroevo.metrics import live_line, scalars
from neuroevo.optim import ALGORITHMS


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
        for key in scalars(ALGORITHMS.metrics()):
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
        self.start = (self.t0, totals.generation, totals.frames)  # this session's
        self.told = False  # the budget's expected wall time, after the first finished row

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
        eta = self.eta(row["fps"]) + " " * 8 if self.live else ""
        line = live_line(row, ALGORITHMS.metrics()) + eta
        print(("\r" if self.live else "") + line, file=self.stream, flush=True)
        # ES's first row waits for its centre episodes, so it finishes a generation late
        expected = None if self.told else expected_wall(self.budget, totals, *self.start)
        if expected is not None:
            self.told = True
            print(f"  the budget ({_budget(self.budget)}) takes about {_clock(expected)} "
                  "at this pace", file=self.stream, flush=True)


def expected_wall(budget: Budget, totals: Totals, t0: float, generation: int,
                  frames: int) -> float | None:
    """Seconds the whole budget takes at the pace of this session since ``t0``, when it
    began at ``generation`` and ``frames``; None when no generation has run yet."""
    spent = time.perf_counter() - t0
    done = totals.generation - generation
    if done <= 0:
        return None
    left = [(budget.generations - totals.generation) * spent / done
            if budget.generations else float("inf")]
    if budget.frames and totals.frames > frames:
        left.append((budget.frames - totals.frames) * spent / (totals.frames - frames))
    return spent + max(0.0, min(left))


def _budget(budget: Budget) -> str:
    parts = ([f"{budget.generations:,} generations"] if budget.generations else []) + (
        [f"{budget.frames:,} frames"] if budget.frames else [])
    return " or ".join(parts)


def _clock(seconds: float) -> str:
    """``14 min 05 s``, ``1 h 02 min``, ``38 s``."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def summary(status: str, cfg, history: list[dict], totals: Totals, run_dir: str,
            seconds: float, video: str, has_checkpoint: bool = True) -> str:
    """What a run got, printed when it ends (``status``: finished or stopped), with the
    commands that come next, ready to paste: play the policy into ``RUN/elite.<video>``,
    plot the curves, and continue (a stopped run: its own budget; a finished one: twice the
    generations)."""
    env = cfg.env.id or cfg.env.game
    deployed = ALGORITHMS[cfg.algo.name].optimizer.deploys
    n = totals.generation
    lines = [f"neuroevo: {status} {cfg.algo.name} on {env}: {n:,} generation"
             f"{'' if n == 1 else 's'}, {totals.frames:,} frames, {_clock(seconds)}"]
    best = max((r["fitness_max"] for r in history if "fitness_max" in r), default=None)
    lines.append(f"  best training episode  {'none yet' if best is None else f'{best:g}'}")
    tested = [r for r in history if r.get("test_score") is not None]
    if tested:
        r = tested[-1]
        lines.append(f"  test score             {r['test_score']:.1f} +/- "
                     f"{r['test_score_std']:.1f} (std over {r['test_episodes']} episodes of "
                     f"the {deployed} after generation {r['generation']}, "
                     f"to {cfg.env.test_episode_cap:,} steps)")
    else:
        lines.append("  test score             none yet (every "
                     f"{cfg.algo.test_every} generations and after the last)")
    lines.append(f"  run directory          {run_dir}")
    if not has_checkpoint:
        lines.append("next: nothing was kept; start again with 'neuroevo run'")
        return "\n".join(lines)
    more = "" if status == "stopped" else f" --generations {2 * totals.generation}"
    lines += ["next:",
              f"  neuroevo play {run_dir} --video {os.path.join(run_dir, 'elite' + video)}",
              f"  neuroevo plot {run_dir} -o {os.path.join(run_dir, 'curves.png')}",
              f"  neuroevo resume {run_dir}{more}"]
    return "\n".join(lines)
