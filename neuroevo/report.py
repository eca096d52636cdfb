"""Report sinks at the edge: TensorBoard event files, when tensorboard is installed."""

from __future__ import annotations

from neuroevo.metrics import SCALARS


class TensorBoard:
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
