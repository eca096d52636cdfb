"""What a generation's metrics row holds, defined once.

``loop.one_generation`` returns one row (a dict) per generation. ``METRICS`` says what each
key means and where it appears: ``metrics.jsonl`` keeps every key of every row, and the
CSV columns, the TensorBoard scalars, the live line of ``neuroevo run`` and the series of
``neuroevo plot`` are all read from here. A new metric is one entry below (and the code
that computes it); an algorithm's own metrics are declared by its optimizer class
(``Optimizer.metrics``, ``neuroevo.optim.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    doc: str
    csv: bool = False  # a column of metrics.csv
    board: bool = False  # a TensorBoard scalar, against frames
    live: str = ""  # the live line shows it as ``live.format(value)``
    plot: str = ""  # ``neuroevo plot`` draws it as a score series with this label


METRICS = (
    Metric("generation", "the generation's index, from 0", csv=True, live="gen {:>4}"),
    Metric("frames", "budgeted frames so far (Atari: emulator frames; others: env steps)",
           csv=True, live="frames {:>11,}"),
    Metric("episodes", "budgeted episodes so far", csv=True, board=True),
    Metric("wall_time", "seconds spent evaluating so far", csv=True, board=True),
    Metric("fitness_max", "best training episode return of the generation", csv=True,
           board=True, live="max {:>8.1f}", plot="max (1 episode)"),
    Metric("fitness_mean", "mean training episode return", csv=True, board=True,
           live="mean {:>8.1f}", plot="population mean"),
    Metric("fitness_min", "worst training episode return", csv=True, board=True),
    Metric("elite_score", "the elite's mean over its validation episodes (an algorithm that "
           "deploys an elite: GA, RS)", csv=True,
           board=True, live="elite {:>8.1f}", plot="elite (validated mean)"),
    Metric("center_score", "the centre's mean over its own episodes, outside the budget (an "
           "algorithm that deploys a centre: ES, PGPE, sep-CMA-ES)", csv=True, board=True,
           live="centre {:>8.1f}", plot="centre (mean, own episodes)"),
    Metric("test_score", "the papers' test score: the elite's (ES: the centre's) mean over "
           "test_episodes fresh episodes at the env's own limit, outside the budget",
           csv=True, board=True, live="test {:>8.1f}", plot="test score (mean)"),
    Metric("test_score_std", "standard deviation of the test episodes' returns", csv=True,
           board=True),
    Metric("test_episodes", "episodes in the test score", csv=True),
    Metric("test_frames", "frames of the test episodes (outside the budget)", csv=True),
    Metric("fps", "frames per second of this generation's passes (the logging episodes of "
           "the generation before included)", csv=True, board=True,
           live="fps {:>7,.0f}"),
    Metric("occupancy", "slot-steps computed over slot-steps offered, every subset's slots "
           "counted at every round of the driver, idle ones too", csv=True, board=True),
    Metric("episode_steps_mean", "mean agent steps of the training episodes"),
    Metric("generation_frames", "budgeted frames of this generation"),
    Metric("eval_frames", "frames of episodes run outside the budget (ES centre)"),
    Metric("best_fitness", "best training episode return of the run so far"),
    Metric("sigma", "the mutation / perturbation scale used (sep-CMA-ES: its step size)"),
    Metric("stdev_mean", "PGPE, sep-CMA-ES: the mean per-parameter std of the search "
           "distribution after the update"),
    Metric("bytes_per_generation", "distributed: driver <-> worker message bytes"),
    Metric("timings", "seconds per pipeline stage, summed over the generation's phases"),
)
BY_NAME = {m.name: m for m in METRICS}
CSV_COLUMNS = tuple(m.name for m in METRICS if m.csv)
SCALARS = tuple(m.name for m in METRICS if m.board)
# the live line's order: where the run is, then the scores
LIVE_ORDER = ("generation", "frames", "fps", "fitness_max", "fitness_mean", "elite_score",
              "center_score", "test_score")


def live_line(row: dict, extra: tuple[Metric, ...] = ()) -> str:
    """The line ``neuroevo run`` prints for ``row``: the live metrics it has, in order, then
    those of ``extra`` (an algorithm's own) that have a live format."""
    shown = [BY_NAME[k] for k in LIVE_ORDER] + [m for m in extra if m.live]
    return "  ".join(m.live.format(row[m.name]) for m in shown if row.get(m.name) is not None)


def columns(extra: tuple[Metric, ...] = ()) -> tuple[str, ...]:
    """``metrics.csv``'s columns: the common ones, then ``extra``'s (an algorithm's own)."""
    return CSV_COLUMNS + tuple(m.name for m in extra if m.csv and m.name not in BY_NAME)


def scalars(extra: tuple[Metric, ...] = ()) -> tuple[str, ...]:
    """The TensorBoard scalars: the common ones, then ``extra``'s."""
    return SCALARS + tuple(m.name for m in extra if m.board and m.name not in BY_NAME)
