"""Where an optimizer and an evaluator meet: ask -> evaluate -> tell, one row per generation.

The optimizer knows nothing about environments and the evaluator nothing about
optimizers; this loop is the only place that holds both. A Deep GA generation is a
training phase plus, when enabled, its elite-validation phase; frames of both count
towards the budget (as in the paper). Episodes run for logging only (ES's centre
evaluation: ``Population.budgeted`` False) are counted apart, as ``eval_frames``.

The papers' test score (Such et al. 2017; Salimans et al. 2017) is a phase of its own: every
``test_every`` generations and after the last one, the elite (ES: the centre) plays
``test_episodes`` fresh episodes (seeds of their own, the env's own episode limit), for
logging only: ``test_frames`` are outside the budget and the optimizer is not told.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuroevo.engine.pipeline import EvalResult
from neuroevo.memory import release_free_memory
from neuroevo.metrics import TOLD


@dataclass
class Totals:
    """Running counters of a run (what a checkpoint needs to resume them)."""

    generation: int = 0
    frames: int = 0
    episodes: int = 0
    wall_time: float = 0.0


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


def test_phase(optimizer, evaluator, tests: Tests, totals: Totals,
               on_episode: Callable | None = None) -> dict:
    """The test score of what the optimizer would deploy now; the row's test keys."""
    pop = optimizer.test_population(tests.episodes)
    if pop is None:
        return {}
    r = evaluator.evaluate(pop, on_episode=on_episode, episode_cap=tests.episode_cap)
    totals.wall_time += r.wall_time
    return {"test_score": float(np.mean(r.fitness)), "test_score_std": float(np.std(r.fitness)),
            "test_episodes": len(r.fitness), "test_frames": r.frames}


def one_generation(optimizer, evaluator, totals: Totals, on_episode: Callable | None = None,
                   ) -> dict:
    """Run every phase of the optimizer's current generation; update ``totals``; return a row."""
    row: dict = {"generation": optimizer.state.generation}
    budgeted, outside = [], []  # the phases' results, counted in the budget or not
    while True:
        pop = optimizer.ask()
        result = evaluator.evaluate(pop, on_episode=on_episode)
        metrics = optimizer.tell(result.fitness)
        (budgeted if pop.budgeted else outside).append((None, result))
        if pop.phase == "train":
            row.update(fitness_max=metrics["fitness_max"], fitness_mean=metrics["fitness_mean"],
                       fitness_min=metrics["fitness_min"],
                       episode_steps_mean=float(np.mean(result.steps)))
        for key in TOLD:
            if key in metrics:
                row[key] = metrics[key]
        if metrics["generation_done"]:
            break
    counted, every = EvalResult.combine(budgeted), EvalResult.combine(budgeted + outside)
    totals.generation += 1
    totals.frames += counted.frames
    totals.episodes += sum(len(r.fitness) for _, r in budgeted)
    wall = every.wall_time
    totals.wall_time += wall
    row.update(frames=totals.frames, episodes=totals.episodes, wall_time=totals.wall_time,
               generation_frames=counted.frames, fps=every.frames / wall if wall > 0 else 0.0,
               occupancy=every.occupancy, best_fitness=optimizer.state.best_fitness,
               timings={k: round(v, 4) for k, v in every.timings.items()})
    if every.frames > counted.frames:
        row["eval_frames"] = every.frames - counted.frames
    if every.comm_bytes:  # a distributed evaluator: driver <-> worker messages of this generation
        row["bytes_per_generation"] = every.comm_bytes
    release_free_memory()
    return row


class Callback:
    """What the driver calls during a run; subclasses override what they need."""

    def episode(self, done: int, total: int, score: float, frames: int) -> None:
        """An episode of the current phase ended (``done`` of ``total``)."""

    def generation(self, row: dict, totals: Totals, history: list[dict]) -> None:
        """A generation ended: ``row`` is ``history[-1]``; ``totals`` are up to date."""

    def close(self) -> None:
        """The run ended, stopped or failed."""


def generations(optimizer, evaluator, budget: Budget, totals: Totals | None = None,
                history: list[dict] | None = None, callbacks: Sequence[Callback] = (),
                guard: Callable = contextlib.nullcontext, tests: Tests = Tests()
                ) -> list[dict]:
    """The one training driver (the CLI's ``run`` and ``resume`` and ``neuroevo.train``):
    one generation after another until ``budget`` is spent, each with its test phase when
    ``tests`` says so, each row appended to ``history`` (a resumed run passes its own) and
    handed to every callback in order.
    ``guard()`` is entered around each generation's callbacks (the CLI defers stop signals
    there, so the checkpoint and the files derived from it always agree). Callbacks are
    closed however the run ends. Returns ``history``."""
    totals = totals if totals is not None else Totals(generation=optimizer.state.generation)
    history = [] if history is None else history

    def on_episode(done: int, total: int, score: float, frames: int) -> None:
        for c in callbacks:
            c.episode(done, total, score, frames)

    try:
        while not budget.spent(totals):
            row = one_generation(optimizer, evaluator, totals, on_episode)
            if tests.due(row["generation"], last=budget.spent(totals)):
                row.update(test_phase(optimizer, evaluator, tests, totals, on_episode))
                row["wall_time"] = totals.wall_time
            history.append(row)
            with guard():
                for c in callbacks:
                    c.generation(history[-1], totals, history)
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
