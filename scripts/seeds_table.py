"""Methods side by side over seeds, from finished run directories (issue 34's Frostbite
cell): each method's final test score, the mean with the 95% percentile bootstrap over seeds
(``learning_table.bootstrap_ci``), and a figure of every seed's centre / elite score and
test scores against frames.

    python scripts/seeds_table.py experiments/learning/frostbite-ns \
        es=es-s0,es-s1,es-s2 nses=nses-s0,nses-s1,nses-s2 nsres=nsres-s0,nsres-s1,nsres-s2

Writes ``OUT/table.md`` and ``OUT/curves.png``; run directories are relative to ``OUT``.
"""

from __future__ import annotations

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from learning_table import bootstrap_ci, machine

from neuroevo.files import atomic_write
from neuroevo.plot import load

# what a row validates: the ES centre, NS-ES's updated centre (its BC episodes), the GA elite
SCORES = ("center_score", "center_reward", "elite_score")


def method(text: str) -> tuple[str, list[str]]:
    label, _, runs = text.partition("=")
    if not runs:
        raise argparse.ArgumentTypeError(f"{text!r}: give LABEL=RUN,RUN,...")
    return label, runs.split(",")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("methods", nargs="+", type=method, metavar="LABEL=RUN,RUN,...")
    a = p.parse_args()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    lines = ["| method | seeds | test score: mean [95% CI] | per seed | frames per run "
             "| generations | test episodes | wall per run |",
             "|---|---|---|---|---|---|---|---|"]
    for k, (label, runs) in enumerate(a.methods):
        last = []
        for n, run in enumerate(runs):
            rows = load(os.path.join(a.out, run))
            tested = [r for r in rows if r.get("test_score") is not None]
            key = next(s for s in SCORES if rows[0].get(s) is not None)
            frames = [r["frames"] / 1e6 for r in rows]
            left.plot(frames, [r[key] for r in rows], color=f"C{k}", alpha=0.7, lw=1,
                      label=label if n == 0 else None)
            right.plot([r["frames"] / 1e6 for r in tested], [r["test_score"] for r in tested],
                       "o-", color=f"C{k}", alpha=0.7, lw=1, label=label if n == 0 else None)
            last.append(rows[-1])
        scores = np.array([r["test_score"] for r in last])
        lo, hi = bootstrap_ci(scores)
        lines.append(f"| {label} | {len(last)} | {scores.mean():,.1f} [{lo:,.1f}, {hi:,.1f}] | "
                     f"{', '.join(f'{s:,.0f}' for s in scores)} | "
                     f"{np.mean([r['frames'] for r in last]) / 1e6:.2f}M | "
                     f"{np.mean([r['generation'] + 1 for r in last]):.0f} | "
                     f"{last[0]['test_episodes']} | "
                     f"{np.mean([r['wall_time'] for r in last]) / 60:.1f} min |")
    left.set(xlabel="frames (M)", ylabel="centre / elite score",
             title="each generation")
    right.set(xlabel="frames (M)", ylabel="test score", title="test phases")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "curves.png"), dpi=110)
    atomic_write(os.path.join(a.out, "table.md"),
                 "<!-- written by scripts/seeds_table.py -->\n"
                 f"Machine: {machine()}. Frames: Atari emulator frames.\n\n"
                 + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
