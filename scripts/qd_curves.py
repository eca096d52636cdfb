"""MAP-Elites' coverage and QD-score against evaluations, over seeds (issue 34, item 6).

    python scripts/qd_curves.py experiments/learning/mapelites-walker/cvt-s{0,1,2} \
        -o experiments/learning/mapelites-walker/curves.png \
        --table experiments/learning/mapelites-walker/table.md

Reads each run directory's ``metrics.jsonl`` (``neuroevo run mapelites``); evaluations are
the training episodes so far (the ``episodes`` column). The figure draws each seed's
coverage and QD-score; the table gives, at the last generation, each seed's and the mean
with the 95% percentile bootstrap over seeds (``learning_table.bootstrap_ci``), and the env
steps they took.
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from learning_table import bootstrap_ci

from neuroevo.files import atomic_write
from neuroevo.plot import load


def interval(values: np.ndarray, fmt: str) -> str:
    lo, hi = bootstrap_ci(values)
    return f"{values.mean():{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--table")
    a = p.parse_args()
    rows = {run: [r for r in load(run) if r.get("coverage") is not None] for run in a.runs}
    fig, (cover, qd) = plt.subplots(1, 2, figsize=(11, 4))
    for run, rs in rows.items():
        episodes = [r["episodes"] for r in rs]  # training episodes so far
        name = pathlib.Path(run).name
        cover.plot(episodes, [100 * r["coverage"] for r in rs], label=name)
        qd.plot(episodes, [r["qd_score"] for r in rs], label=name)
    cover.set(xlabel="evaluations (episodes)", ylabel="coverage (%)", title="coverage")
    qd.set(xlabel="evaluations (episodes)", ylabel="QD-score", title="QD-score")
    for ax in (cover, qd):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    last = {run: rs[-1] for run, rs in rows.items()}
    lines = ["| run | evaluations | env steps | coverage | QD-score | best fitness | test score |",
             "|---|---|---|---|---|---|---|"]
    for run, r in last.items():
        evals = r["episodes"]
        test = next((x["test_score"] for x in reversed(rows[run])
                     if x.get("test_score") is not None), float("nan"))
        lines.append(f"| {pathlib.Path(run).name} | {evals:,} | {r['frames']:,} | "
                     f"{100 * r['coverage']:.1f}% | {r['qd_score']:,.0f} | "
                     f"{r['best_fitness']:.1f} | {test:.1f} |")
    cov = np.array([100 * r["coverage"] for r in last.values()])
    score = np.array([r["qd_score"] for r in last.values()])
    lines.append(f"| mean [95% bootstrap] | | | {interval(cov, '.1f')}% | "
                 f"{interval(score, ',.0f')} | | |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.table:
        atomic_write(a.table, text)


if __name__ == "__main__":
    main()
