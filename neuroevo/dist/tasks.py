"""Whole commands as Ray tasks (sweeps run their trials with it)."""

from __future__ import annotations

import os
import subprocess

from neuroevo.dist.session import init, ray_module, shutdown


def run_commands(commands: list[list[str]], cpus: int = 1, address: str = "",
                 cwd: str | None = None):
    """Run commands as Ray tasks (``cpus`` each) on a local instance or at ``address``, in
    ``cwd`` where it exists on the node; yields ``(index, returncode, stderr tail)`` as each
    finishes (sweeps use it; give absolute paths for a cluster's shared storage)."""
    init(address)
    ray = ray_module()

    @ray.remote(num_cpus=cpus)
    def run(command: list[str]) -> tuple[int, str]:
        here = cwd if cwd and os.path.isdir(cwd) else None
        out = subprocess.run(command, capture_output=True, text=True, cwd=here)
        return out.returncode, out.stderr[-2000:]

    pending = {run.remote(c): i for i, c in enumerate(commands)}
    try:
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            code, err = ray.get(ref)
            yield pending.pop(ref), code, err
    finally:
        shutdown()
