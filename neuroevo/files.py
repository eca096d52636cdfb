"""Atomic file writes: a crash leaves the old version or the new one, never half of one."""

from __future__ import annotations

import os


def atomic_write(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path.tmp``, flush it to disk, then rename it over ``path``."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
