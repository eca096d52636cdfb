"""The deceptive maze table (issue 34): which methods escape the Hard Maze's trap.

    python scripts/maze_table.py experiments/learning/maze            # run (or continue)
    python scripts/maze_table.py experiments/learning/maze --report-only

Each cell (method, seed) is a normal run directory, ``OUT/table-runs/<method>-s<seed>``, run as
``neuroevo run METHOD --env HardMaze-v0 --frames N ... --resume`` in a subprocess, so the
script continues where it stopped. Every method gets the same env steps, the same network
(an MLP 64-64 on the maze's 11 sensors) and a population of 100 a generation; each keeps its
own defaults otherwise (ES: sigma 0.02, Adam 0.01; the NS family: 5 centres, k = 10; GA and
GA-NS: truncation 20, 5 elite candidates x 1 validation episode, the maze being
deterministic, and sigma 0.01, see ``GA_SETS``; GA-NS: k = 10, archive probability 0.01).

The table reports, over seeds: the distance to the goal of what the run deploys (the test
score is minus that distance), and whether any training episode ended within
``SOLVED_RADIUS`` (10) of the goal. The trap, the cul-de-sac that the straight line to the
goal leads into (under the wall below the goal room), keeps reward-seeking methods at a
distance of about 39. ``archives.png`` draws seed 0's behaviour archives over the maze
(``neuroevo plot --archive``), ``maze.png`` every method's closest episode against env
steps and MAP-Elites' coverage. ``archives.png`` needs the runs' checkpoints, which the
repository does not keep (``experiments/learning/maze/.gitignore``): it is drawn where the
runs ran.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

from neuroevo.checkpoint import RunDir
from neuroevo.envs.maze import SOLVED_RADIUS
from neuroevo.errors import CheckpointError
from neuroevo.files import atomic_write
from neuroevo.plot import load, plot_archives

METHODS = ("es", "nses", "nsres", "nsraes", "ga", "gans", "mapelites")
LABELS = {"es": "OpenAI-ES", "nses": "NS-ES", "nsres": "NSR-ES", "nsraes": "NSRA-ES",
          "ga": "GA", "gans": "GA-NS", "mapelites": "MAP-Elites"}
COMMON = ("--env", "HardMaze-v0", "--population", "100", "--net", "mlp",
          "--set", "net.hidden=64,64", "--set", "algo.test_episodes=1",
          "--set", "algo.test_every=1000000")
# The maze has no randomness: one validation episode per elite candidate. The GA's sigma
# 0.002 is the paper's for Atari nets; on this MLP it barely moves (30 generations of seed 0:
# -87 with 0.002, -39 with 0.01, -39 with 0.05), so both GAs take 0.01.
GA_SETS = ("--set", "algo.elite_candidates=5", "--set", "algo.validation_episodes=1",
           "--set", "algo.sigma=0.01")
# MAP-Elites: a 20 x 20 grid over the maze's bounding box (x 3-195, y 5-202), sigma 0.01 as
# the GAs; QD-score offset -300, so that a cell adds 300 minus its distance to the goal
# (Lehman & Stanley's fitness).
ARCHIVES = ("nses", "nsres", "nsraes", "gans", "mapelites")  # methods with a behaviour archive
OWN = {"ga": GA_SETS, "gans": GA_SETS,
       "mapelites": ("--set", "algo.grid_low=0,0", "--set", "algo.grid_high=200,210",
                     "--set", "algo.qd_offset=-300")}


def run_dir(out: str, method: str, seed: int) -> str:
    return os.path.join(out, "table-runs", f"{method}-s{seed}")


def rows(path: str) -> list[dict]:
    try:
        return load(path) if os.path.exists(os.path.join(path, "metrics.jsonl")) else []
    except CheckpointError:
        return []


def finished(r: list[dict], frames: int) -> bool:
    return bool(r) and r[-1]["frames"] >= frames and "test_score" in r[-1]


def run_cell(out: str, method: str, seed: int, frames: int) -> None:
    path = run_dir(out, method, seed)
    if finished(rows(path), frames):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    print(f"maze_table: {method} seed {seed}", flush=True)
    command = [sys.executable, "-m", "neuroevo", "run", method, "--seed", str(seed),
               "--frames", str(frames), "--run-dir", path, "--resume", "--no-progress",
               *COMMON, *OWN.get(method, ())]
    with open(path + ".log", "a") as log:
        rc = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"maze_table: {method} seed {seed} exited {rc}; see {path}.log")


def summary(out: str, methods, seeds, frames: int) -> list[dict]:
    table = []
    for method in methods:
        done = [(s, rows(run_dir(out, method, s))) for s in seeds]
        done = [(s, r) for s, r in done if finished(r, frames)]
        if not done:
            continue
        distance = [-r[-1]["test_score"] for _, r in done]
        best = [-r[-1]["best_fitness"] for _, r in done]
        table.append({"method": method, "seeds": len(done), "distance": distance,
                      "best": best, "solved": sum(b < SOLVED_RADIUS for b in best),
                      "deployed_solved": sum(d < SOLVED_RADIUS for d in distance),
                      "coverage": [r[-1].get("coverage") for _, r in done],
                      "qd_score": [r[-1].get("qd_score") for _, r in done],
                      "frames": float(np.mean([r[-1]["frames"] for _, r in done])),
                      "wall": float(np.mean([r[-1]["wall_time"] for _, r in done]))})
    return table


def write_table(table: list[dict], out: str, frames: int) -> None:
    lines = [f"Hard Maze, {frames:,} env steps per run, population 100, MLP 64-64 "
             f"(`python scripts/maze_table.py {out}`).", "",
             "| method | seeds | reached the goal (an episode within 10) | deployed policy "
             "within 10 | deployed distance to goal, per seed | closest episode, per seed "
             "| wall per run |", "|---|---|---|---|---|---|---|"]
    for t in table:
        lines.append(
            f"| {LABELS[t['method']]} | {t['seeds']} | {t['solved']} of {t['seeds']} | "
            f"{t['deployed_solved']} of {t['seeds']} | "
            f"{', '.join(f'{d:.1f}' for d in t['distance'])} | "
            f"{', '.join(f'{d:.1f}' for d in t['best'])} | {t['wall']:.0f} s |")
    for t in table:
        if t["coverage"][0] is not None:
            lines += ["", f"{LABELS[t['method']]}: coverage of the 20 x 20 grid "
                      f"{', '.join(f'{c:.1%}' for c in t['coverage'])}, QD-score (offset "
                      f"-300) {', '.join(f'{q:,.0f}' for q in t['qd_score'])}, per seed."]
    atomic_write(os.path.join(out, "table.md"), "\n".join(lines) + "\n")


def figure(out: str, methods, seeds) -> None:
    """``archives.png``: seed 0's behaviour archive of each method that keeps one
    (``neuroevo plot --archive``); ``maze.png``: every run's closest episode to the goal
    against env steps, and MAP-Elites' coverage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archived = [run_dir(out, m, seeds[0]) for m in methods if m in ARCHIVES]
    archived = [path for path in archived if RunDir(path).has_checkpoint()]
    if archived:
        plot_archives(archived, os.path.join(out, "archives.png"))
    fig, (ax, qd) = plt.subplots(1, 2, figsize=(11, 4.2))
    for k, method in enumerate(methods):
        for s in seeds:
            r = rows(run_dir(out, method, s))
            label = LABELS[method] if s == seeds[0] else None
            if r:
                ax.plot([x["frames"] for x in r], [-x["best_fitness"] for x in r],
                        color=f"C{k}", lw=1, label=label)
            if r and "coverage" in r[0]:
                qd.plot([x["frames"] for x in r], [x["coverage"] for x in r], color=f"C{k}",
                        lw=1, label=label)
    ax.axhline(SOLVED_RADIUS, color="red", ls=":", lw=1)
    ax.set(xlabel="env steps", ylabel="closest episode to the goal so far", yscale="log",
           title="Hard Maze: best distance, each seed")
    qd.set(xlabel="env steps", ylabel="share of the 20 x 20 grid filled",
           title="MAP-Elites coverage, each seed")
    ax.legend(fontsize=8)
    qd.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "maze.png"), dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--frames", type=int, default=4_000_000)
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args()
    methods, seeds = args.methods.split(","), [int(s) for s in args.seeds.split(",")]
    if not args.report_only:
        for seed in seeds:
            for method in methods:
                run_cell(args.out, method, seed, args.frames)
                write_table(summary(args.out, methods, seeds, args.frames), args.out,
                            args.frames)
    write_table(summary(args.out, methods, seeds, args.frames), args.out, args.frames)
    figure(args.out, methods, seeds)


if __name__ == "__main__":
    main()
