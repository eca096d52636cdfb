"""Population-based training against a fixed grid at equal total frames: OpenAI-ES on
Hopper-v5, four trials each, every trial the same frame budget.

    python experiments/sweeps/pbt_vs_grid.py OUT [--frames 400000] [--report-only]

The grid runs sigma x lr at {0.02, 0.1} x {0.01, 0.05} for the whole budget. PBT starts
four trials at random points of the ranges that hold the grid (sigma log 0.01-0.2, lr log
0.003-0.1) and every 8 generations continues the worst from the best one's checkpoint with
sigma and lr perturbed. Both are ``scripts/sweep.py`` commands (printed as they run); the
figure ``OUT/pbt_vs_grid.png`` shows every trial's centre score against its frames, and
``OUT/pbt_vs_grid.json`` each arm's final centre and test scores.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON = ["--algo", "es", "--set", "env.id=Hopper-v5", "--set", "engine.device=cpu",
          "--set", "net.hidden=64,64", "--set", "algo.population=40", "--seeds", "0"]
ARMS = {
    "grid": ["--grid", "algo.sigma=0.02,0.1", "--grid", "algo.lr=0.01,0.05"],
    "pbt": ["--samples", "4", "--range", "algo.sigma=log:0.01:0.2",
            "--range", "algo.lr=log:0.003:0.1", "--scheduler", "pbt", "--pbt-interval", "8"],
}


def command(out: str, arm: str, frames: int) -> list[str]:
    return [sys.executable, os.path.join(ROOT, "scripts", "sweep.py"), os.path.join(out, arm),
            *COMMON, *ARMS[arm], "--frames", str(frames)]


def trials(out: str, arm: str) -> list[dict]:
    with open(os.path.join(out, arm, "summary.csv")) as f:
        table = list(csv.DictReader(f))
    for t in table:
        with open(os.path.join(out, arm, t["run_dir"], "metrics.jsonl")) as f:
            t["rows"] = [json.loads(line) for line in f]
    return table


def simulated(out: str, arm: str) -> int | None:
    """Frames the arm's trials simulated, from every row Tune heard (a PBT trial's run
    directory keeps only its last lineage: an exploit takes the donor's rows and frames)."""
    files = glob.glob(os.path.join(out, arm, "tune", "*", "result.json"))
    if not files:
        return None  # OUT/tune is not kept in git; the figure below was measured with it
    total = 0
    for path in files:
        with open(path) as f:
            total += sum(json.loads(line).get("generation_frames", 0) for line in f)
    return total


def report(out: str, kept: dict) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    figures = {}
    for arm, colour in (("grid", "C0"), ("pbt", "C3")):
        table = trials(out, arm)
        finals = []
        for t in table:
            rows = [r for r in t["rows"] if r.get("center_score") is not None]
            ax.plot([r["frames"] for r in rows], [r["center_score"] for r in rows],
                    color=colour, lw=0.9, alpha=0.8, label=arm if not finals else None)
            last = t["rows"][-1]
            finals.append({"run_dir": t["run_dir"], "sigma": float(t["algo.sigma"]),
                           "lr": float(t["algo.lr"]), "frames": last["frames"],
                           "center_score": last.get("center_score"),
                           "test_score": last.get("test_score")})
        best = max(finals, key=lambda f: f["center_score"])
        figures[arm] = {"trials": finals, "simulated_frames": simulated(out, arm) or kept.get(arm),
                        "best_center_score": best["center_score"],
                        "best_test_score": best["test_score"],
                        "mean_center_score": sum(f["center_score"] for f in finals) / len(finals)}
    ax.set_xlabel("frames (per trial)")
    ax.set_ylabel("centre score (5 episodes)")
    ax.set_title("OpenAI-ES on Hopper-v5: PBT vs a 2x2 grid, 4 trials each", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "pbt_vs_grid.png"), dpi=110)
    with open(os.path.join(out, "pbt_vs_grid.json"), "w") as f:
        json.dump(figures, f, indent=1)
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--frames", type=int, default=400_000, help="budget of every trial")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args()
    if not args.report_only:
        for arm in ARMS:
            cmd = command(args.out, arm, args.frames)
            print("$", " ".join(cmd[1:]), flush=True)
            if subprocess.run(cmd).returncode != 0:
                return 1
    previous = os.path.join(args.out, "pbt_vs_grid.json")
    kept = {}
    if args.report_only and os.path.exists(previous):  # keep what only OUT/tune could say
        with open(previous) as f:
            kept = {arm: v.get("simulated_frames") for arm, v in json.load(f).items()}
    for arm, f in report(args.out, kept).items():
        print(f"{arm}: best centre {f['best_center_score']:.1f} (its test score "
              f"{f['best_test_score']}), mean final centre {f['mean_center_score']:.1f}, "
              f"{f['simulated_frames']:,} frames simulated in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
