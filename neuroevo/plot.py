"""``neuroevo plot``: learning curves (the score series of ``neuroevo.metrics``) of run
directories, or with ``--archive`` the behaviour space a novelty or quality-diversity run
explored.

Each run gets a panel; generation 0 is a population of random initialisations, and its
mean is drawn as a dashed line: the baseline a learning run must clearly beat.
"""

from __future__ import annotations

import io
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle
from matplotlib.ticker import EngFormatter

from neuroevo.build import optimizer_of
from neuroevo.checkpoint import RunDir
from neuroevo.envs.locomotion import TASKS
from neuroevo.envs.maze import ENV_ID as MAZE_ID
from neuroevo.envs.maze import GOAL, START, WALLS
from neuroevo.errors import CheckpointError, ConfigError, UnknownName
from neuroevo.files import atomic_write, read_regular
from neuroevo.metrics import METRICS
from neuroevo.optim import ALGORITHMS, cvt
from neuroevo.optim.mapelites import parse_bounds
from neuroevo.serial import first_line, loads_strict

X = {"frames": ("frames", "frames (Atari: emulator frames; gymnasium: env steps)"),
     "generations": ("generation", "generation"),
     "time": ("wall_time", "wall time (s)")}


FORMATS = (".png", ".pdf", ".svg")
POPULATION_STYLE = {"fitness_max": {"alpha": 0.6}, "fitness_mean": {}}


def load(run_dir: str, warn=None) -> list[dict]:
    """The rows of ``RUN_DIR/metrics.jsonl``; a torn last line (a run killed while another
    program copied the file) is skipped with ``warn(message)``."""
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    try:
        lines = [line for line in read_regular(str(path)).decode().splitlines()
                 if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"cannot read {path} ({first_line(e)}); give run directories written "
                              "by 'neuroevo run'") from None
    rows = []
    for k, line in enumerate(lines):
        try:
            row = loads_strict(line)
            if not isinstance(row, dict):
                raise ValueError("a row is not an object")
        except ValueError as e:
            if k == len(lines) - 1 and rows:
                if warn is not None:
                    warn(f"{path}: skipped a torn last line ({e})")
                break
            raise CheckpointError(f"{path} line {k + 1} is not a metrics row ({e}); give run "
                                  "directories written by 'neuroevo run'") from None
        rows.append(row)
    if not rows:
        raise CheckpointError(f"{path} has no generation yet; plot it after its first one")
    return rows


def _series(rows: list[dict], key: str) -> list[float]:
    """A metric per row; null (a NaN or infinity when it was written) is a gap."""
    return [float("nan") if r.get(key) is None else r[key] for r in rows]


def plot_runs(runs: list[str], output: str, x: str = "frames", warn=None,
              y: list[str] | None = None) -> None:
    """Draw one panel per run into ``output`` (PNG, PDF or SVG by its extension): the
    metrics ``y`` (default: every score series of ``neuroevo.metrics`` the run has)."""
    if x not in X:
        raise UnknownName("x axis", x, X)
    known = {m.name: m for m in (*METRICS, *ALGORITHMS.metrics()) if m.name != "timings"}
    for name in y or ():
        if name not in known:
            raise UnknownName("metric", name, known)
    drawn = [known[name] for name in y] if y else [m for m in METRICS if m.plot]
    if pathlib.Path(output).suffix.lower() not in FORMATS:
        raise ConfigError(f"-o {output}: the image must end in {', '.join(FORMATS)}")
    key, label = X[x]
    histories = [load(run, warn) for run in runs]  # read every run before drawing anything
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
    for ax, run, rows in zip(axes[0], runs, histories, strict=True):
        for m in drawn:
            have = [r for r in rows if m.name in r]  # test scores: every test_every rows
            if have:
                # thin: the population's episodes; thick: the scores of the run's policy
                style = POPULATION_STYLE.get(m.name, {"linewidth": 2.5})
                ax.plot([r[key] for r in have], _series(have, m.name), label=m.plot or m.name,
                        marker="o" if len(have) < len(rows) else None, **style)
        if not y and rows[0].get("fitness_mean") is not None:
            ax.axhline(rows[0]["fitness_mean"], color="gray", linestyle="--",
                       label="random-init mean (gen 0)")
        ax.set_title(pathlib.Path(run).name)
        ax.set_xlabel(label)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 250k, 10M
        ax.set_ylabel("episode score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, output)


def _save(fig, output: str) -> None:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format=pathlib.Path(output).suffix.lower()[1:])
    plt.close(fig)
    atomic_write(output, buffer.getvalue())


def plot_archives(runs: list[str], output: str) -> None:
    """One panel per run of its behaviour archive (2-D behaviours): a novelty search's
    archive coloured by the order its points joined (early to late generations, in the
    spirit of Uber's VINE), or MAP-Elites' grid as a heat map of its cells' fitness; on the
    Hard Maze and the Humanoid trap, over their walls."""
    if pathlib.Path(output).suffix.lower() not in FORMATS:
        raise ConfigError(f"-o {output}: the image must end in {', '.join(FORMATS)}")
    loaded = [_archive(run) for run in runs]  # read every run before drawing anything
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 4.6), squeeze=False)
    for ax, run, (cfg, state) in zip(axes[0], runs, loaded, strict=True):
        if "cells" in state:
            low = parse_bounds(cfg.algo.grid_low, "grid_low")
            high = parse_bounds(cfg.algo.grid_high, "grid_high")
            grid = _cells_image(state, cfg.algo.bins, low, high)  # [y, x]
            shown = ax.imshow(np.where(np.isfinite(grid), grid, np.nan), origin="lower",
                              extent=(low[0], high[0], low[1], high[1]), cmap="viridis")
            fig.colorbar(shown, ax=ax, label="fitness of the cell's elite")
        else:
            points = state["archive"].numpy()
            shown = ax.scatter(points[:, 0], points[:, 1], c=np.arange(len(points)), s=8,
                               cmap="viridis")
            fig.colorbar(shown, ax=ax, label="order added (early to late generations)")
        if cfg.env.id == MAZE_ID:
            for wall in WALLS:
                ax.plot(wall[[0, 2]], wall[[1, 3]], color="black", lw=1.5)
            ax.plot(*START, "bs", label="start")
            ax.plot(*GOAL, "r*", markersize=12, label="goal")
            ax.invert_yaxis()  # as Lehman & Stanley draw it: the goal at the top
            ax.legend(fontsize=8, loc="lower right")
        for (x, y, _), (hx, hy, _) in TASKS[cfg.env.id].walls if cfg.env.id in TASKS else ():
            ax.add_patch(Rectangle((x - hx, y - hy), 2 * hx, 2 * hy, color="black"))
        ax.set_title(f"{pathlib.Path(run).name} ({cfg.algo.name})")
        ax.set_aspect("equal")
    _save(fig, output)


def _cells_image(state: dict, bins: int, low, high) -> np.ndarray:
    """MAP-Elites' fitness per cell as an image: the grid's cells, or for a CVT a raster of
    400 x 400 pixels, each coloured by its nearest centroid's cell (its Voronoi region)."""
    fitness = state["fitness"].numpy()
    if state.get("centroids") is None:
        return fitness.reshape(bins, bins).T
    xs = np.linspace(low[0], high[0], 400)
    ys = np.linspace(low[1], high[1], 400)
    pixels = torch.from_numpy(np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2))
    return fitness[cvt.nearest(pixels, state["centroids"]).numpy()].reshape(400, 400)


def _archive(run: str):
    """``(config, optimizer state)`` of a run with a 2-D behaviour archive, or a one-line
    error."""
    run_dir = RunDir(run)
    cfg = run_dir.load_config()
    saved = run_dir.load(cfg)["optimizer"]
    optimizer = optimizer_of(cfg)
    with run_dir.loading():  # checked whole (shapes, indices, values) before it is drawn
        optimizer.load_state_dict(saved)
    state = vars(optimizer.state)
    if "cells" not in state and "archive" not in state:
        raise ConfigError(f"{run} is a {cfg.algo.name} run, which keeps no behaviour archive; "
                          "--archive draws novelty search (nses, nsres, nsraes, gans) and "
                          "MAP-Elites runs")
    points = state.get("bcs") if "cells" in state else state.get("archive")
    if points is None or len(points) == 0:
        raise ConfigError(f"{run} has no behaviour archive yet; draw it after a generation")
    if points.shape[1] != 2:
        raise ConfigError(f"--archive draws 2-D behaviours; {run}'s have {points.shape[1]} "
                          "dimensions")
    return cfg, state
