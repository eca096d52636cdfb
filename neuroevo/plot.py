"""``neuroevo plot``: learning curves (elite, max and mean fitness) of run directories.

Each run gets a panel; generation 0 is a population of random initialisations, and its
mean is drawn as a dashed line: the baseline a learning run must clearly beat.
"""

from __future__ import annotations

import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import EngFormatter

from neuroevo.errors import CheckpointError, UnknownName

X = {"frames": ("frames", "frames (Atari: emulator frames; gymnasium: env steps)"),
     "generations": ("generation", "generation"),
     "time": ("wall_time", "wall time (s)")}


def load(run_dir: str) -> list[dict]:
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {path} ({e}); give run directories written by "
                              "'neuroevo run'") from None
    if not rows:
        raise CheckpointError(f"{path} has no generation yet; plot it after its first one")
    return rows


def plot_runs(runs: list[str], output: str, x: str = "frames") -> None:
    """Draw one panel per run into ``output`` (PNG, PDF or SVG by its extension)."""
    if x not in X:
        raise UnknownName("x axis", x, X)
    key, label = X[x]
    histories = [load(run) for run in runs]  # read every run before drawing anything
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
    for ax, run, rows in zip(axes[0], runs, histories, strict=True):
        xs = [r[key] for r in rows]
        ax.plot(xs, [r["fitness_max"] for r in rows], label="max (1 episode)", alpha=0.6)
        ax.plot(xs, [r["fitness_mean"] for r in rows], label="population mean")
        if "elite_score" in rows[0]:
            ax.plot(xs, [r["elite_score"] for r in rows], label="elite (validated mean)",
                    linewidth=2.5)
        if "center_score" in rows[0]:
            ax.plot(xs, [r["center_score"] for r in rows], label="ES centre (mean, own episodes)",
                    linewidth=2.5)
        ax.axhline(rows[0]["fitness_mean"], color="gray", linestyle="--",
                   label="random-init mean (gen 0)")
        ax.set_title(pathlib.Path(run).name)
        ax.set_xlabel(label)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 250k, 10M
        ax.set_ylabel("episode score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
