"""The learning table: Deep GA against random search on Atari, and OpenAI-ES on MuJoCo, at
equal budgets, scored by the papers' test score (issue 12; REFERENCE.md sections 2-3).

    python scripts/learning_table.py                      # run (or continue) every cell
    python scripts/learning_table.py --report-only        # table and figure from what exists
    python scripts/learning_table.py experiments/learning/lowrank --algos es --games "" \
        --mujoco HalfCheetah-v5 --mujoco-steps 5000000 --ranks 0,1   # issue 15: low rank

Each cell (algorithm, task, seed) is a normal run directory, ``OUT/table-runs/<cell>``, run
as ``neuroevo run ... --resume`` in a subprocess: running the script again skips the cells
that finished (their last row has the budget's frames and a test score) and continues the
one that was interrupted from its checkpoint. After every cell it rewrites ``OUT/table.md``
(one row per task and algorithm, over this command's cells and any others already in
``OUT``: the test score as the mean over seeds with a 95%
percentile-bootstrap interval over seeds, frames, wall time per run, the machine) and
``OUT/table.png`` (the elite's / centre's validated score against frames, each seed thin,
the mean over seeds thick).

The Atari cells follow the Deep GA paper's algorithm at a CPU budget; what they scale down is
stated in the table: population 64 (paper: 1000), truncation 12 (paper: 20), 5 elite
candidates on 5 validation episodes (paper: 10 on 30), the small net for both GA and RS
(Uber's RS config used it; the paper's GA the large net). The test score is the paper's measure:
the final elite on ``--test-episodes`` fresh episodes without the training cap, 30 here
where the paper used 200. With sticky actions off the emulator is deterministic, and an
episode of a deterministic policy is fixed by its start state, of which ale-py makes at most
30 (the number of no-op frames after FIRE; ``neuroevo.envs.atari``): 200 episodes only
sample the same few start states more finely, at a cost (frostbite's test episodes run to
40k frames) that this CPU cannot pay 18 times.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from neuroevo.checkpoint import RunDir
from neuroevo.errors import CheckpointError
from neuroevo.files import atomic_write
from neuroevo.plot import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "experiments", "configs")
# the centre methods on MuJoCo, each with its config (the same net, population and env)
MUJOCO = {"es": "es_halfcheetah.yaml", "pgpe": "pgpe_mujoco.yaml",
          "sepcma": "sepcma_mujoco.yaml"}
LABELS = {"sepcma": "sep-CMA-ES"}
ATARI = ("--set", "net.name=small", "--set", "algo.population=64",
         "--set", "algo.elite_candidates=5", "--set", "algo.validation_episodes=5",
         "--set", "env.episode_cap=5000", "--set", "algo.train_episodes=1",
         "--set", "env.fire_on_life_loss=false", "--set", "env.fire_on_frozen_screen=0")


@dataclass(frozen=True)
class Cell:
    algo: str
    task: str  # an ALE game or a gymnasium id
    seed: int
    frames: int
    test_episodes: int
    sets: tuple[str, ...] = ()  # --set items for every cell, after the table's own
    rank: int = 0  # algo.rank: 0 is full rank; r > 0 the low-rank population (issue 15)

    @property
    def name(self) -> str:
        return f"{self.algo}-{self.task}-s{self.seed}" + (f"-r{self.rank}" if self.rank else "")

    @property
    def label(self) -> str:
        return LABELS.get(self.algo, self.algo.upper()) + (
            f", rank {self.rank}" if self.rank else "")

    def run_dir(self, out: str) -> str:
        return os.path.join(out, "table-runs", self.name)

    def command(self, run_dir: str) -> list[str]:
        base = [sys.executable, "-m", "neuroevo", "run", self.algo, "--seed", str(self.seed),
                "--frames", str(self.frames), "--run-dir", run_dir, "--resume",
                "--no-progress", "--set", f"algo.test_episodes={self.test_episodes}",
                "--set", "algo.test_every=1000000"]  # one test phase: after the last generation
        if self.algo in MUJOCO:
            return [*base, "--config", os.path.join(CONFIGS, MUJOCO[self.algo]),
                    "--env", self.task, *self.extra()]
        config = "deep_ga_atari.yaml" if self.algo == "ga" else "random_search_atari.yaml"
        return [*base, "--config", os.path.join(CONFIGS, config), "--game", self.task, *ATARI,
                *(("--set", "algo.truncation=0") if self.algo == "ga" else ()),  # automatic:
                *self.extra()]  # population // 5, 12 of 64

    def extra(self) -> list[str]:
        sets = (*self.sets, *((f"algo.rank={self.rank}",) if self.rank else ()))
        return [x for item in sets for x in ("--set", item)]


def cells(args) -> list[Cell]:
    """Seed by seed, so that an unfinished table has every task at its first seeds. Random
    search has no low-rank form (its members are fresh draws, not perturbations): RS cells
    are full rank whatever ``--ranks`` says."""
    out = []
    for seed in args.seeds:
        for rank in args.ranks:
            out += [Cell(algo, game, seed, args.frames, args.test_episodes, tuple(args.set),
                         rank)
                    for game in args.games for algo in ("ga", "rs")
                    if algo in args.algos and not (algo == "rs" and rank)]
            out += [Cell(algo, env, seed, args.mujoco_steps, args.test_episodes,
                         tuple(args.set), rank)
                    for env in args.mujoco for algo in MUJOCO if algo in args.algos]
    return out


def earlier_cells(out: str) -> list[Cell]:
    """The cells already in ``OUT/table-runs``, read from their configs: a table written by
    one command keeps the cells that another command ran into the same ``OUT``."""
    found = []
    folder = os.path.join(out, "table-runs")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        try:
            cfg = RunDir(os.path.join(folder, name)).load_config()
        except CheckpointError:  # a log file, or a cell that never wrote its config
            continue
        a = cfg.algo
        cell = Cell(a.name, cfg.env.id or cfg.env.game, cfg.seed, cfg.budget.frames,
                    a.test_episodes, rank=a.rank or 0)
        if cell.name == name:  # a folder this script made
            found.append(cell)
    return found


def reported(this: list[Cell], out: str) -> list[Cell]:
    """This command's cells, then the other cells already in ``OUT``."""
    names = {c.name for c in this}
    return this + [c for c in earlier_cells(out) if c.name not in names]


def rows(run_dir: str) -> list[dict]:
    if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        return []
    try:
        return load(run_dir)
    except CheckpointError:  # no complete row yet: resume starts the run again
        return []


def finished(cell: Cell, r: list[dict]) -> bool:
    """Whether a cell's rows reach its budget and end with the test phase."""
    return bool(r) and r[-1]["frames"] >= cell.frames and "test_score" in r[-1]


def run_cell(cell: Cell, out: str) -> None:
    run_dir = cell.run_dir(out)
    if finished(cell, rows(run_dir)):
        return
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    print(f"learning_table: {cell.name}", flush=True)
    with open(run_dir + ".log", "a") as log:
        rc = subprocess.call(cell.command(run_dir), stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"learning_table: {cell.name} exited {rc}; see {run_dir}.log")


def bootstrap_ci(values, resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap of the mean over ``values`` (here: one value per seed)."""
    v = np.asarray(values, dtype=float)
    means = np.random.default_rng(seed).choice(v, (resamples, len(v))).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, CPU only"


def summary(all_cells: list[Cell], out: str) -> list[dict]:
    """One entry per (task, algo) from the finished cells."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for cell in all_cells:
        r = rows(cell.run_dir(out))
        if finished(cell, r):
            groups.setdefault((cell.task, cell.label), []).append(r[-1])
    table = []
    for (task, algo), last in groups.items():
        scores = [r["test_score"] for r in last]
        lo, hi = bootstrap_ci(scores)
        table.append({"task": task, "algo": algo, "seeds": len(last), "mean": np.mean(scores),
                      "lo": lo, "hi": hi, "scores": scores,
                      "frames": np.mean([r["frames"] for r in last]),
                      "wall": np.mean([r["wall_time"] for r in last]),
                      "test_episodes": last[0]["test_episodes"]})
    return table


def write_table(table: list[dict], out: str, args) -> None:
    lines = ["| task | algorithm | seeds | test score: mean [95% CI] | per seed | frames per run "
             "| test episodes | wall per run |", "|---|---|---|---|---|---|---|---|"]
    for t in table:
        per_seed = ", ".join(f"{s:,.0f}" for s in t["scores"])
        lines.append(f"| {t['task']} | {t['algo']} | {t['seeds']} | {t['mean']:,.1f} "
                     f"[{t['lo']:,.1f}, {t['hi']:,.1f}] | {per_seed} | {t['frames'] / 1e6:.2f}M "
                     f"| {t['test_episodes']} | {t['wall'] / 60:.1f} min |")
    text = ("<!-- written by scripts/learning_table.py; the prose around it is in "
            "experiments/learning/README.md -->\n"
            f"Machine: {machine()}. Frames: Atari emulator frames; MuJoCo env steps.\n\n"
            + "\n".join(lines) + "\n")
    atomic_write(os.path.join(out, "table.md"), text)


def write_figure(all_cells: list[Cell], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(c.task for c in all_cells))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for k, label in enumerate(dict.fromkeys(c.label for c in all_cells if c.task == task)):
            curves = []
            for cell in (c for c in all_cells if c.task == task and c.label == label):
                r = rows(cell.run_dir(out))
                key = "center_score" if cell.algo in MUJOCO else "elite_score"
                x, y = [row["frames"] for row in r], [row.get(key) for row in r]
                if r:
                    ax.plot(x, y, color=f"C{k}", alpha=0.3, lw=0.8)
                    curves.append((x, y))
            if curves:
                grid = np.linspace(0, max(max(x) for x, _ in curves), 100)
                mean = np.mean([np.interp(grid, x, np.asarray(y, float)) for x, y in curves],
                               axis=0)
                ax.plot(grid, mean, color=f"C{k}", lw=2, label=label)
        ax.set_title(task)
        ax.set_xlabel("frames (MuJoCo: steps)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    axes[0][0].set_ylabel("elite / centre, validated score")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "table.png"), dpi=110)
    plt.close(fig)  # one figure per cell: the script runs for hours


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", default=os.path.join(ROOT, "experiments", "learning"))
    p.add_argument("--games", type=lambda s: s.split(",") if s else [],
                   default=["frostbite", "kangaroo", "zaxxon"])
    p.add_argument("--mujoco", type=lambda s: s.split(",") if s else [],
                   default=["HalfCheetah-v5", "Hopper-v5"])
    p.add_argument("--seeds", type=ints, default=[0, 1, 2])
    p.add_argument("--algos", type=lambda s: s.split(","), default=["ga", "rs", "es"],
                   help="which of ga, rs, es, pgpe, sepcma to run (default: ga, rs, es)")
    p.add_argument("--ranks", type=ints, default=[0],
                   help="algo.rank values, each a cell of its own: 0 full rank, r > 0 low rank")
    p.add_argument("--frames", type=int, default=3_000_000, help="Atari frames per run")
    p.add_argument("--mujoco-steps", type=int, default=3_000_000, help="MuJoCo steps per run")
    p.add_argument("--test-episodes", type=int, default=30,
                   help="test episodes per cell (paper: 200; see the module docstring)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config key for every cell (repeatable), e.g. engine.device=cuda")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    for name in ("seeds", "ranks"):
        if len(set(getattr(args, name))) != len(getattr(args, name)):
            p.error(f"--{name} repeats a value; give distinct values")
    if any(r < 0 for r in args.ranks):
        p.error("--ranks takes ranks >= 0 (0: full rank)")
    if not set(args.algos) <= {"ga", "rs", *MUJOCO}:
        p.error(f"--algos takes ga, rs, {', '.join(MUJOCO)}, not {','.join(args.algos)}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    all_cells = cells(args)
    for cell in ([] if args.report_only else all_cells):
        run_cell(cell, args.out)
        report(reported(all_cells, args.out), args)
    report(reported(all_cells, args.out), args)
    return 0


def report(all_cells: list[Cell], args) -> None:
    write_table(summary(all_cells, args.out), args.out, args)
    write_figure(all_cells, args.out)


if __name__ == "__main__":
    sys.exit(main())
