"""Where an optimizer and an evaluator meet: ask -> evaluate -> tell, one row per generation.

The optimizer knows nothing about environments and the evaluator nothing about
optimizers; this loop is the only place that holds both. A Deep GA generation is a
training phase plus, when enabled, its elite-validation phase; frames of both count
towards the budget (as in the paper). Episodes run for logging only are counted apart:
ES's centre evaluation (``Optimizer.center_population``) as ``eval_frames``.

The papers' test score (Such et al. 2017; Salimans et al. 2017) is logging too: every
``test_every`` generations and after the last one, the elite (ES: the centre) plays
``test_episodes`` fresh episodes (seeds of their own, the env's own episode limit):
``test_frames`` are outside the budget and the optimizer is not told. Logging episodes run
in the next generation's first pass (``generations``).

One generation, hop by hop, for a reader who starts here:

1. ``generations`` -> ``one_generation``: ``optimizer.ask()`` gives a ``Population``
   (``optim/base.py``; compact genomes, ``genomes.py``) for the phase the optimizer is at.
2. ``evaluator.evaluate([Job(pop), *carried])`` (the protocol: ``evaluation.py``): the local
   engine (``engine/pipeline.py``: ``PipelinedEvaluator``; several drivers:
   ``engine/parallel.py``; Ray: ``dist/ray_backend.py``) gives each free slot a member
   (``_refill``: decode into slot storage, seeded reset), steps the envs (``envs/``) and runs
   the batched forward pass (``policy/batched.py``, ``kernels/``) until every episode ended;
   one ``EpisodeBatch`` per job.
3. ``merge_observations``: a training phase's observation statistics into the normaliser.
4. ``optimizer.tell(fitness)``: the update (``optim/``); its metrics go into the row
   (``metrics.py`` names every key). Steps 1-4 repeat until the generation's phases are done
   (Deep GA: training, then elite validation).
5. The row gets frames, wall time and costs, and waits in ``Totals.pending`` for its logging
   episodes (``logging_jobs``: ES's centre, a test phase), which step 2 of the next
   generation carries; ``finish`` adds their keys.
6. ``Callback``s: ``checkpoint.Checkpoints`` (``RunDir``: checkpoint, metrics.jsonl, CSV,
   elite and policy files), ``report.Progress`` (the live line) and ``report.TensorBoard``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuroevo.engine.obsstats import merge as merge_obs_stats
from neuroevo.errors import StateError
from neuroevo.evaluation import EpisodeBatch, Evaluator, Job, OnEpisode
from neuroevo.memory import release_free_memory
from neuroevo.schema import integer, real


@dataclass
class Totals:
    """Running counters of a run (what a checkpoint needs to resume them)."""

    generation: int = field(default=0, metadata=integer(0))
    frames: int = field(default=0, metadata=integer(0))
    episodes: int = field(default=0, metadata=integer(0))
    wall_time: float = field(default=0.0, metadata=real("nonnegative"))
    pending: dict | None = None  # the last generation's row, waiting for its logging episodes


@dataclass
class Budget:
    generations: int | None = None
    frames: int | None = None

    @classmethod
    def of(cls, cfg) -> Budget:
        """A config's budget (0 in the config means no limit; ``build.resolve`` gives a
        config without either limit ``DEFAULT_GENERATIONS``)."""
        return cls(cfg.budget.generations or None, cfg.budget.frames or None)

    def spent(self, totals: Totals) -> bool:
        return ((self.generations is not None and totals.generation >= self.generations) or
                (self.frames is not None and totals.frames >= self.frames))


@dataclass(frozen=True)
class Tests:
    episodes: int = 0  # 0: no test phase
    every: int = 1
    episode_cap: int | None = None

    @classmethod
    def of(cls, cfg) -> Tests:
        """A (resolved) config's test schedule."""
        return cls(cfg.algo.test_episodes, cfg.algo.test_every,
                   cfg.env.test_episode_cap or None)

    def due(self, generation: int, last: bool) -> bool:
        """Whether generation ``generation`` (from 0) ends with a test phase."""
        return self.episodes > 0 and (last or (generation + 1) % self.every == 0)


def logging_jobs(optimizer, tests: Tests, generation: int, last: bool) -> list[tuple[str, Job]]:
    """The episodes that finish generation ``generation``'s row and change no state, asked
    of the optimizer right after that generation: ES's centre (``center_score``) and, when
    ``tests`` says so, the test phase (``test_score``). Keyed for ``logged``."""
    jobs = []
    center = optimizer.center_population()
    if center is not None:
        jobs.append(("center", Job(center)))
    if tests.due(generation, last):
        pop = optimizer.test_population(tests.episodes)
        if pop is not None:
            jobs.append(("test", Job(pop, episode_cap=tests.episode_cap)))
    return jobs


def logged(key: str, r: EpisodeBatch) -> dict:
    """A logging job's row keys."""
    if key == "center":
        return {"center_score": float(np.mean(r.fitness)), "eval_frames": r.frames}
    return {"test_score": float(np.mean(r.fitness)), "test_score_std": float(np.std(r.fitness)),
            "test_episodes": len(r.fitness), "test_frames": r.frames}


def finish(row: dict, logs: dict) -> dict:
    """``row`` with its logging keys; frames outside the budget add up."""
    out = {**row, **logs}
    if "eval_frames" in row and "eval_frames" in logs:
        out["eval_frames"] = row["eval_frames"] + logs["eval_frames"]
    return out


def merge_observations(obs_norm, batch: EpisodeBatch) -> None:
    """The one place observation statistics change the normaliser: a training phase's
    sampled observations (``extras["obs_stats"]``), merged in member order after the phase.
    Ray's driver logs the same increments as a ``Stats`` event, which its replicas apply
    with the same merge."""
    stats = batch.extras.get("obs_stats")
    if not stats:
        return
    if obs_norm is None:
        raise StateError("the evaluator reported observation statistics but the loop was "
                         "given no normaliser to merge them into: pass the run's obs_norm")
    merge_obs_stats(obs_norm, stats)


def one_generation(optimizer, evaluator: Evaluator, totals: Totals,
                   on_episode: OnEpisode | None = None, carried: Sequence[tuple[str, Job]] = (),
                   obs_norm=None) -> tuple[dict, dict]:
    """Run every phase of the optimizer's current generation, the first in one pass with
    ``carried`` (``logging_jobs`` of the generation before, which fill slots the phase
    leaves idle); merge each phase's observation statistics into ``obs_norm``; update
    ``totals``. Returns this generation's row, still without its own logging keys, and the
    carried jobs' keys for the row before."""
    row: dict = {"generation": optimizer.state.generation}
    budgeted, every, logs, outside = [], [], {}, 0
    carried = list(carried)
    while True:
        pop = optimizer.ask()
        results = evaluator.evaluate([Job(pop), *(job for _, job in carried)], on_episode)
        merge_observations(obs_norm, results[0])
        for (key, _), r in zip(carried, results[1:], strict=True):
            logs.update(logged(key, r))
        carried = []
        result = results[0]
        metrics = optimizer.tell(result.fitness, result.extras.get("bc"))
        if pop.budgeted:
            budgeted.append((None, result))
        else:
            outside += result.frames
        every += [(None, r) for r in results]
        if pop.phase == "train":
            row.update(fitness_max=metrics["fitness_max"], fitness_mean=metrics["fitness_mean"],
                       fitness_min=metrics["fitness_min"],
                       episode_steps_mean=float(np.mean(result.steps)))
        for metric in optimizer.metrics:  # the keys of tell's metrics that rows hold
            if metric.name in metrics:
                row[metric.name] = metrics[metric.name]
        if metrics["generation_done"]:
            break
    counted, passes = EpisodeBatch.combine(budgeted), EpisodeBatch.combine(every)
    totals.generation += 1
    totals.frames += counted.frames
    totals.episodes += sum(len(r.fitness) for _, r in budgeted)
    wall = passes.wall_time
    totals.wall_time += wall
    row.update(frames=totals.frames, episodes=totals.episodes, wall_time=totals.wall_time,
               generation_frames=counted.frames, fps=passes.frames / wall if wall > 0 else 0.0,
               occupancy=passes.occupancy, best_fitness=optimizer.state.best_fitness,
               timings={k: round(v, 4) for k, v in passes.timings.items()})
    if outside:  # phases of this generation outside the budget
        row["eval_frames"] = outside
    if passes.comm_bytes:  # a distributed evaluator: driver <-> worker messages of this generation
        row["bytes_per_generation"] = passes.comm_bytes
    release_free_memory()
    return row, logs


class Callback:
    """What the driver calls during a run; subclasses override what they need."""

    def episode(self, done: int, total: int, score: float, frames: int) -> None:
        """An episode of the current pass ended (``done`` of ``total``)."""

    def checkpoint(self, totals: Totals, history: list[dict]) -> None:
        """A generation ended: the optimizer is between generations, ``history`` holds the
        finished rows and ``totals.pending`` the row still waiting for its logging episodes
        (they run in the next generation's first pass)."""

    def generation(self, row: dict, totals: Totals, history: list[dict]) -> None:
        """A row is finished (its logging keys included): ``row`` is in ``history``, the
        last row or, when two finish at once, the one before; ``totals`` are up to date."""

    def close(self) -> None:
        """The run ended, stopped or failed."""


def generations(optimizer, evaluator: Evaluator, budget: Budget, totals: Totals | None = None,
                history: list[dict] | None = None, callbacks: Sequence[Callback] = (),
                guard: Callable = contextlib.nullcontext, tests: Tests = Tests(),
                obs_norm=None) -> list[dict]:
    """The one training driver (the CLI's ``run`` and ``resume`` and ``neuroevo.train``):
    one generation after another until ``budget`` is spent, each row appended to
    ``history`` (a resumed run passes its own) and handed to every callback in order.

    A row is finished by its logging episodes (``logging_jobs``: ES's centre, the test phase
    when due), which change no state: they run in the next generation's first pass, where
    they fill slots the population leaves idle, and after the last generation on their own.
    Their seeds are their own, so every row is what it would be with the phases one after
    another. Meanwhile the row waits in ``totals.pending`` (checkpoints keep it).
    ``guard()`` is entered around each generation's callbacks (the CLI defers stop signals
    there, so the checkpoint and the files derived from it always agree). ``obs_norm``: the
    run's observation normaliser, if it has one (``merge_observations``). Callbacks are
    closed however the run ends. Returns ``history``."""
    totals = totals if totals is not None else Totals(generation=optimizer.state.generation)
    history = [] if history is None else history

    def on_episode(done: int, total: int, score: float, frames: int) -> None:
        for c in callbacks:
            c.episode(done, total, score, frames)

    def boundary(finished: list[dict]) -> None:
        history.extend(finished)
        with guard():
            for c in callbacks:
                c.checkpoint(totals, history)
            for row in finished:
                for c in callbacks:
                    c.generation(row, totals, history)

    def waiting() -> list[tuple[str, Job]]:
        if totals.pending is None:
            return []
        return logging_jobs(optimizer, tests, totals.pending["generation"],
                            last=budget.spent(totals))

    try:
        carried = waiting()
        while not budget.spent(totals):
            row, logs = one_generation(optimizer, evaluator, totals, on_episode, carried,
                                       obs_norm)
            finished = [] if totals.pending is None else [finish(totals.pending, logs)]
            totals.pending = row
            carried = waiting()
            if not carried:
                finished.append(row)
                totals.pending = None
            boundary(finished)
        if totals.pending is not None:  # the last generation's logging episodes, alone
            results = (evaluator.evaluate([job for _, job in carried], on_episode)
                       if carried else [])
            row = totals.pending
            for (key, _), r in zip(carried, results, strict=True):
                row = finish(row, logged(key, r))
                totals.wall_time += r.wall_time
            row["wall_time"] = totals.wall_time
            totals.pending = None
            boundary([row])
    finally:
        for c in callbacks:
            c.close()
    return history


@dataclass
class RunResult:
    history: list[dict] = field(default_factory=list)
    optimizer: object = None
    policy: object = None
    obs_norm: object = None  # the observation normaliser the policy was trained with, if any
    config: object = None  # the resolved config the run followed
