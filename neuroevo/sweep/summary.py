"""A sweep's results from Tune's ``ResultGrid``: ``OUT/summary.csv`` (one row per trial: the
swept values, seed, final score, frames, wall time, how it ended, its run directory) and
``OUT/summary.png`` (the final score against each swept value, and the score of every trial
against frames)."""

from __future__ import annotations

import csv
import io
import math
import os

import numpy as np

from neuroevo.files import atomic_write
from neuroevo.loop import Budget, Totals
from neuroevo.sweep.space import Plan
from neuroevo.sweep.trial import run_name, seed_of

STATUS_COLOURS = {"finished": "C0", "stopped early": "C1", "error": "C3"}


def rows(plan: Plan, results) -> list[dict]:
    """One summary row per trial of Tune's ``results``, in trial order. A trial that ended
    without error before its budget was stopped by the scheduler ("stopped early")."""
    out = []
    for result in results:
        m, config = result.metrics or {}, result.config or {}
        score = m.get(plan.metric)
        out.append({**{k: config.get(k) for k in plan.swept}, "seed": seed_of(plan, config),
                    "score": float("nan") if score is None else score,
                    "frames": m.get("frames", 0), "generations": m.get("generations", 0),
                    "wall_time": round(m.get("wall_time", 0.0), 2),
                    "status": status(plan, m, result.error),
                    "run_dir": os.path.join("runs", run_name(m["trial_id"]))
                    if "trial_id" in m else "", "_curve": _curve(result, plan.metric)})
    return sorted(out, key=lambda r: r["run_dir"])


def status(plan: Plan, metrics: dict, error) -> str:
    """How a trial ended: "error", "finished" (its budget spent) or "stopped early" (by
    the scheduler)."""
    spent = Budget(plan.generations, plan.frames).spent(
        Totals(metrics.get("generations", 0), metrics.get("frames", 0)))
    return "error" if error else "finished" if spent else "stopped early"


def _curve(result, metric: str) -> tuple[list, list]:
    frame = result.metrics_dataframe
    if frame is None or metric not in frame or "frames" not in frame:
        return [], []
    return frame["frames"].tolist(), frame[metric].tolist()


def write(out: str, plan: Plan, table: list[dict]) -> None:
    columns = [*plan.swept, "seed", "score", "frames", "generations", "wall_time", "status",
               "run_dir"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(table)
    atomic_write(os.path.join(out, "summary.csv"), buffer.getvalue())
    if table:
        atomic_write(os.path.join(out, "summary.png"), figure(plan, table))


def figure(plan: Plan, table: list[dict]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = len(plan.swept) + 1
    fig, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.6), squeeze=False)
    label = f"final {plan.metric}"
    for ax, key in zip(axes[0], plan.swept, strict=False):
        values = sorted({r[key] for r in table if r[key] is not None}, key=_order)
        xs = [v if _numeric(v) else i for i, v in enumerate(values)]
        for status, colour in STATUS_COLOURS.items():
            points = [(xs[values.index(r[key])], r["score"]) for r in table
                      if r["status"] == status and r[key] is not None]
            if points:
                ax.scatter(*zip(*points, strict=True), color=colour, s=14, alpha=0.7,
                           label=status)
        means = [np.nanmean([r["score"] for r in table if r[key] == v]) for v in values]
        ax.plot(xs, means, "k_", ms=16, mew=2, label="mean over trials")
        if _numeric(values[0]) and min(xs) > 0 and max(xs) / min(xs) >= 10:
            ax.set_xscale("log")
        if not _numeric(values[0]):
            ax.set_xticks(xs, [str(v) for v in values])
        ax.set_xlabel(key + (" (last value)" if plan.scheduler == "pbt" else ""))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    ax = axes[0][-1]
    for r in table:
        frames, scores = r["_curve"]
        ax.plot(frames, scores, color=STATUS_COLOURS[r["status"]], lw=0.8, alpha=0.7)
    ax.set_xlabel("frames")
    ax.set_ylabel(plan.metric)
    ax.set_title(f"{len(table)} trials, {plan.search} search, {plan.scheduler}", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    return png.getvalue()


def best(plan: Plan, table: list[dict]) -> dict | None:
    """The trial with the best final score (NaN never wins)."""
    scored = [r for r in table if isinstance(r["score"], (int, float))
              and math.isfinite(r["score"])]
    if not scored:
        return None
    sign = 1 if plan.mode == "max" else -1
    return max(scored, key=lambda r: sign * r["score"])


def _numeric(v) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool)


def _order(v):
    return (0, v, "") if _numeric(v) else (1, 0, str(v))
