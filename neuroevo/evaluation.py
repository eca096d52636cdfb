"""The evaluator seam: what the loop asks of any evaluator, and what comes back.

An evaluator runs episodes of populations' members and knows no optimizer. Each one (the
local pipelined engine, its threads over several drivers, Ray's actors; a device-resident
simulator next) implements ``Evaluator``, and the loop evaluates through that alone:

- ``evaluate(jobs, on_episode) -> [EpisodeBatch]``: the ``Job``s' episodes, one batch per
  job in order. An evaluator may run the jobs in one pass (their episodes share slots) or
  one after another; each episode is what it would be alone either way.
- ``layout() -> dict``: what it runs on, for the run's first line and ``run.json``.
- ``close()``: release envs, threads and actors; a running ``evaluate`` stops at its next
  step.

An ``EpisodeBatch`` carries what every evaluator measures (fitness, steps, frames, costs)
and ``extras``: per-episode data whose kind is declared in ``EXTRAS``, so that a batch's
parts combine without the evaluator or the loop knowing what they hold. Evaluators only
report: changing state from what they report (the observation normaliser's merge) is the
loop's, one named event that Ray's replicas replay (``neuroevo.dist.replica.Stats``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

OnEpisode = Callable[[int, int, float, int], None]  # (done, total, score, frames)

# The kinds of ``EpisodeBatch.extras``: "members", a dict keyed by member index whose parts
# are united (members are disjoint across parts); "episodes", an array whose first axis
# is the batch's episodes, placed by position like fitness.
EXTRAS = {
    "obs_stats": "members",  # member -> [sum, sumsq, count] of its sampled observations
    "bc": "episodes",  # [P, d] behaviour characterisations (neuroevo.engine.behaviour)
}


@dataclass(frozen=True)
class Job:
    """One population's episodes in an evaluation: the members at ``indices`` (None: all),
    cut at ``episode_cap`` agent steps (None: the env spec's training cap)."""

    pop: object  # a ``neuroevo.genomes.Population``
    indices: np.ndarray | None = None
    episode_cap: int | None = None

    def members(self) -> np.ndarray:
        return (np.arange(len(self.pop)) if self.indices is None
                else np.asarray(self.indices, dtype=np.int64))


@dataclass
class EpisodeBatch:
    """The episodes of one job (or of a pass, or a generation, combined)."""

    fitness: np.ndarray  # [P] episode returns (the game score for Atari)
    steps: np.ndarray  # [P] agent steps per episode
    frames: int  # emulator frames (steps x frameskip)
    wall_time: float
    timings: dict = field(default_factory=dict)  # seconds per pipeline stage
    computed: int = 0  # network rows computed, summed over forward passes
    offered: int = 0  # slots of every subset, summed over the driver's rounds
    comm_bytes: int = 0  # bytes of messages between driver and workers (distributed only)
    extras: dict = field(default_factory=dict)  # kind in ``EXTRAS``

    def __post_init__(self):
        unknown = set(self.extras) - set(EXTRAS)
        if unknown:
            raise ValueError(f"EpisodeBatch extras {sorted(unknown)} are not declared in "
                             f"neuroevo.evaluation.EXTRAS ({sorted(EXTRAS)})")

    @property
    def occupancy(self) -> float:
        """Slot-steps computed over slot-steps offered: every subset's slots at every round
        of the driver, those idle or resetting included."""
        return self.computed / self.offered if self.offered else 0.0

    @classmethod
    def combine(cls, parts: Sequence[tuple[np.ndarray | None, EpisodeBatch]], size: int = 0,
                wall_time: float | None = None) -> EpisodeBatch:
        """One batch from ``(positions, part)`` pairs: each part's fitness, steps and
        per-episode extras go to its ``positions`` of a batch of ``size`` episodes (None:
        counted, not placed); frames, slot rows, stage timings and message bytes add up;
        per-member extras are united. ``wall_time``: the parts ran at once for that long;
        None: one after another (their wall times add up). The one merge of the engine's
        drivers, the distributed driver, a generation's phases and the bench."""
        fitness, steps = np.zeros(size), np.zeros(size, dtype=np.int64)
        timings: dict[str, float] = {}
        extras: dict = {}
        for pos, r in parts:
            if pos is not None:
                fitness[pos], steps[pos] = r.fitness, r.steps
            for name, seconds in r.timings.items():
                timings[name] = timings.get(name, 0.0) + seconds
            for name, value in r.extras.items():
                if EXTRAS[name] == "members":
                    extras.setdefault(name, {}).update(value)
                elif pos is not None:
                    value = np.asarray(value)
                    whole = extras.setdefault(name, np.zeros((size, *value.shape[1:]),
                                                             value.dtype))
                    whole[pos] = value
        wall = sum(r.wall_time for _, r in parts) if wall_time is None else wall_time
        return cls(fitness, steps, sum(r.frames for _, r in parts), wall, timings,
                   sum(r.computed for _, r in parts), sum(r.offered for _, r in parts),
                   sum(r.comm_bytes for _, r in parts), extras)

    @classmethod
    def concat(cls, batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """``batches`` end to end, one after another (their wall times add up)."""
        starts = np.cumsum([0, *(len(b.fitness) for b in batches)])
        return cls.combine([(np.arange(starts[k], starts[k + 1]), b)
                            for k, b in enumerate(batches)], int(starts[-1]))

    def _episodes(self, keep) -> dict:
        """The per-episode extras of the episodes at ``keep`` (indices, a mask or a slice)."""
        return {name: np.asarray(v)[keep] for name, v in self.extras.items()
                if EXTRAS[name] == "episodes"}

    def select(self, keep: np.ndarray) -> EpisodeBatch:
        """The episodes at ``keep`` (indices or a mask) with their per-episode extras; the
        costs and per-member extras unchanged (they were spent)."""
        return dataclasses.replace(self, fitness=self.fitness[keep], steps=self.steps[keep],
                                   extras={**self.extras, **self._episodes(keep)})

    def split(self, jobs: Sequence[Job], frameskip: int) -> list[EpisodeBatch]:
        """This batch of a pass over ``jobs``' members, in order, as one batch per job:
        each job's fitness, steps, frames and per-episode extras; the pass's costs (wall
        time, stage timings, slot rows, message bytes, per-member extras) all on the first
        job's, so that adding the batches up counts them once."""
        out, start = [], 0
        for k, job in enumerate(jobs):
            n = len(job.members())
            mine = slice(start, start + n)
            start += n
            part = self.select(mine)
            frames = int(part.steps.sum()) * frameskip
            out.append(dataclasses.replace(part, frames=frames) if k == 0 else
                       EpisodeBatch(part.fitness, part.steps, frames, 0.0,
                                    extras=self._episodes(mine)))
        return out


class Evaluator(Protocol):
    """What the loop, the bench and ``play`` ask of an evaluator (module docstring)."""

    def evaluate(self, jobs: Sequence[Job], on_episode: OnEpisode | None = None
                 ) -> list[EpisodeBatch]: ...

    def layout(self) -> dict: ...

    def close(self) -> None: ...


def evaluate_one(evaluator: Evaluator, pop, indices=None, episode_cap: int | None = None,
                 on_episode: OnEpisode | None = None) -> EpisodeBatch:
    """One population's episodes (``indices``: those members, in that order)."""
    return evaluator.evaluate([Job(pop, indices, episode_cap)], on_episode)[0]
