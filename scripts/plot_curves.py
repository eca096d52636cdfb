"""Learning curves from run directories: elite, max and mean fitness per generation.

Run: python scripts/plot_curves.py RUN_DIR [RUN_DIR ...] -o FILE.png [--x frames|generations|time]
Generation 0 is a population of random initialisations: its mean is drawn as a dashed
line, the baseline a learning run must clearly beat.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

X = {"frames": ("frames", "emulator frames"), "generations": ("generation", "generation"),
     "time": ("wall_time", "wall time (s)")}


def load(run_dir: str) -> list[dict]:
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--x", choices=sorted(X), default="frames")
    args = ap.parse_args()
    key, label = X[args.x]
    fig, axes = plt.subplots(1, len(args.runs), figsize=(5.5 * len(args.runs), 4), squeeze=False)
    for ax, run in zip(axes[0], args.runs, strict=True):
        rows = load(run)
        x = [r[key] for r in rows]
        ax.plot(x, [r["fitness_max"] for r in rows], label="max (1 episode)", alpha=0.6)
        ax.plot(x, [r["fitness_mean"] for r in rows], label="population mean")
        if "elite_score" in rows[0]:
            ax.plot(x, [r["elite_score"] for r in rows], label="elite (validated mean)",
                    linewidth=2.5)
        ax.axhline(rows[0]["fitness_mean"], color="gray", linestyle="--",
                   label="random-init mean (gen 0)")
        ax.set_title(pathlib.Path(run).name)
        ax.set_xlabel(label)
        ax.set_ylabel("episode score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
