"""Report sinks at the edge: TensorBoard event files, when tensorboard is installed."""

from __future__ import annotations

import os

SCALARS = ("fitness_max", "fitness_mean", "fitness_min", "elite_score", "center_score", "fps",
           "occupancy",
           "episodes", "wall_time")


class TensorBoard:
    """Scalars of every generation row, against emulator frames, in ``RUN_DIR/tensorboard``.

    A no-op when tensorboard is not installed (``pip install tensorboard`` turns it on). On
    resume, events past the checkpoint (written before a crash) are purged.
    """

    def __init__(self, run_dir: str, resume_frames: int = 0):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self.writer = None
            return
        self.writer = SummaryWriter(os.path.join(run_dir, "tensorboard"),
                                    purge_step=resume_frames or None)

    def write(self, row: dict) -> None:
        if self.writer is None:
            return
        for key in SCALARS:
            if row.get(key) is not None:
                self.writer.add_scalar(key, row[key], global_step=row["frames"])
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
