"""The replica protocol between a driver and its remote workers, without any transport.

A worker holds a *replica* of the driver's optimizer and observation normaliser, built from
the same resolved config, so that the driver sends seeds and fitness, never parameters.
Both change only through named events, which the driver keeps in order in a ``Log``:

- ``Tell(generation, phase, fitness, behaviour)``: the fitness (and the behaviour
  characterisations, for novelty search) the driver's optimizer was told for that phase of
  that generation;
- ``Stats(stats)``: observation-statistics increments merged into the driver's normaliser.

With each piece of work the driver sends an ``Update``: the protocol version, the events
from the worker's position on, and the fingerprint of the driver's state after them. The
worker's ``Replica`` applies each event once and in order (a ``Tell`` only to the phase its
own ``ask()`` is at), and refuses the work when the version, the position or the
fingerprint differs. So a replica's next ``ask()`` gives the driver's population, or the
run stops with a reason.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from neuroevo.engine.obsstats import merge as merge_obs_stats
from neuroevo.errors import WorkerError

PROTOCOL = 3  # bump when an event's meaning or fields change (2: ES's centre is no Tell;
# 3: a Tell carries behaviour)


@dataclass(frozen=True)
class Tell:
    generation: int
    phase: str
    fitness: np.ndarray
    behaviour: np.ndarray | None = None  # [P, d] EpisodeBatch.extras["bc"], when measured


@dataclass(frozen=True)
class Stats:
    stats: dict  # member -> [sum, sumsq, count] (``neuroevo.engine.obsstats``)


@dataclass(frozen=True)
class Update:
    protocol: int
    start: int  # the log position of events[0]
    events: tuple
    check: int  # fingerprint of the driver's state after the events


def _canonical(x, out: list) -> None:
    if isinstance(x, torch.Tensor):
        out.append(x.detach().cpu().contiguous().numpy().tobytes())
    elif isinstance(x, np.ndarray):
        out.append(np.ascontiguousarray(x).tobytes())
    elif dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            _canonical(getattr(x, f.name), out)
    elif isinstance(x, dict):
        for key in sorted(x):
            out.append(str(key).encode())
            _canonical(x[key], out)
    elif isinstance(x, (list, tuple)):
        out.append(b"[")
        for v in x:
            _canonical(v, out)
        out.append(b"]")
    else:
        out.append(repr(x).encode())


def fingerprint(optimizer, obs_norm) -> int:
    """crc32 of the optimizer's state and the observation statistics, by value."""
    parts: list[bytes] = []
    _canonical(optimizer.state_dict()["state"], parts)
    if obs_norm is not None:
        _canonical(obs_norm.state_dict(), parts)
    return zlib.crc32(b"".join(parts))


class Log:
    """The driver's events in order; those every worker has are dropped (``trim``)."""

    def __init__(self, start: int = 0):
        self.events: list = []
        self.base = start  # the position of events[0]

    @property
    def end(self) -> int:
        return self.base + len(self.events)

    def append(self, event: Tell | Stats) -> None:
        self.events.append(event)

    def since(self, position: int, check: int) -> Update:
        if position < self.base:
            raise WorkerError(f"log position {position} was dropped (the log starts at "
                              f"{self.base})")
        return Update(PROTOCOL, position, tuple(self.events[position - self.base:]), check)

    def trim(self, position: int) -> None:
        """Drop the events before ``position`` (the lowest position any worker is at)."""
        del self.events[:max(0, position - self.base)]
        self.base = max(self.base, position)


class Replica:
    """A worker's optimizer and normaliser, following the driver's log from ``applied``
    (the log position of the state they were restored from)."""

    def __init__(self, optimizer, obs_norm, applied: int):
        self.optimizer, self.obs_norm, self.applied = optimizer, obs_norm, applied
        self._print: tuple[int, int] | None = None  # (applied, fingerprint)

    def apply(self, update: Update) -> None:
        if update.protocol != PROTOCOL:
            raise WorkerError(f"the driver speaks replica protocol {update.protocol}, this "
                              f"worker {PROTOCOL}; run one neuroevo version on every node")
        if update.start > self.applied:
            raise WorkerError(f"events {self.applied}..{update.start - 1} never reached this "
                              "worker")
        for k, event in enumerate(update.events, update.start):
            if k >= self.applied:
                self._event(event)
                self.applied = k + 1
        if self._print is None or self._print[0] != self.applied:
            self._print = (self.applied, fingerprint(self.optimizer, self.obs_norm))
        if self._print[1] != update.check:
            raise WorkerError("this worker's optimizer replica differs from the driver's (was "
                              "the optimizer told other fitness than evaluate returned?)")

    def _event(self, event: Tell | Stats) -> None:
        if isinstance(event, Stats):
            merge_obs_stats(self.obs_norm, event.stats)
            return
        pop = self.optimizer.ask()
        if (pop.generation, pop.phase) != (event.generation, event.phase):
            raise WorkerError(f"the driver told generation {event.generation} "
                              f"({event.phase}) but this replica is at generation "
                              f"{pop.generation} ({pop.phase})")
        self.optimizer.tell(event.fitness, event.behaviour)
