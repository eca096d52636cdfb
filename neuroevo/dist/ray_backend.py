"""Evaluation in Ray actors with seed-only messages.

Each actor is made by the driver's *replica factory* (a picklable callable, given by the
caller: ``neuroevo.build.Replicas``), which builds the run's policy, env pools, noise table
and a replica of the optimizer on the actor's node, and owns a pipelined evaluator on that
node's CPUs and GPU. This module knows no optimizer: it moves the events of the replica
protocol (``neuroevo.dist.replica``) and the results.

The driver never ships parameters during a run. With every chunk of member indices it sends
the actor an ``Update``: the events it has not seen (the fitness the driver's optimizer was
told for each phase; the merged observation-statistics increments) and the fingerprint of
the driver's state, which the actor's replica must match. Actors pull chunks as they finish
(load balance) and return fitness, steps, frames and per-member observation statistics. The
optimizer's state (for ES, the centre: a full vector) travels once, when an actor starts.

If an actor dies mid-generation, its unfinished chunks go back to the queue, the dead actor
is killed for good, and a replacement starts from the driver's state; the replacement gets
work once it answers (Ray schedules it when resources allow) while the others go on. Each
member's result is kept exactly once. Fitness depends only on (genome, seed, index), and
statistics are merged in member order, so results equal the local backend's for any
number of actors.
"""

from __future__ import annotations

import collections
import os
import pickle
import time
from collections.abc import Callable

import numpy as np
import torch

from neuroevo.dist.replica import Log, Replica, Stats, Tell, Update, fingerprint
from neuroevo.dist.session import init, ray_module, shutdown
from neuroevo.errors import ConfigError, WorkerError
from neuroevo.evaluation import EpisodeBatch, Job, OnEpisode, evaluate_one
from neuroevo.memory import release_free_memory


class Worker:
    """The actor: a replica of the run, built on this node by the driver's factory."""

    def __init__(self, replicas: Callable, optimizer_state: dict, obs_norm_state: dict | None,
                 applied: int, cpus: int, members: int):
        torch.set_num_threads(max(1, cpus))
        self.built = replicas(cpus, members)
        self.built.restore({"optimizer": optimizer_state, "obs_norm": obs_norm_state})
        self.replica = Replica(self.built.optimizer, self.built.obs_norm, applied)

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, update: Update, indices: np.ndarray,
                 logging: tuple[str, int, int | None] | None = None):
        """``logging``: ``(phase, episodes, cap)`` of logging episodes, rebuilt from the
        replica's state (phase ``"test"``: its ``test_population``; ``"validate"``: its
        ``center_population``), not from its ``ask``; or None."""
        try:
            self.replica.apply(update)
        except WorkerError as e:
            raise WorkerError(f"worker {os.getpid()}: {e}") from None
        optimizer, cap = self.built.optimizer, None
        if logging is None:
            pop = optimizer.ask()
        elif logging[0] == "test":
            pop, cap = optimizer.test_population(logging[1]), logging[2]
        else:
            pop, cap = optimizer.center_population(), logging[2]
        r = evaluate_one(self.built.evaluator, pop, indices, cap)
        release_free_memory()  # an actor's heap fragments as the driver's does
        return indices, r

    def close(self) -> None:
        self.built.evaluator.close()


class RayEvaluator:
    """A ``neuroevo.evaluation.Evaluator`` whose episodes run in Ray actors, each of which
    wraps the local evaluator of a replica of the run.

    Args:
        replicas: the replica factory, ``replicas(cpus, members) -> Built``: picklable; it
            builds the run's objects in an actor with ``cpus`` cores, sized for chunks of
            ``members`` members.
        optimizer: the driver's optimizer (its state boots new actors). The loop must tell
            it the fitness ``evaluate`` returned, as ``neuroevo.loop`` does: the next
            ``evaluate`` of another phase logs that as the ``Tell`` the replicas apply.
        obs_norm: the driver's observation normaliser, or None. The loop merges a training
            phase's observation statistics into it (``neuroevo.loop.merge_observations``);
            ``evaluate`` logs them as the ``Stats`` event the replicas apply.
        population: members per generation (sizes the chunks).
        use_gpu: give each actor an equal share of the cluster's GPUs.
        actors: number of actors (0: one per Ray node).
        address: a Ray cluster (``auto`` or ``HOST:PORT``); empty: start a local instance
            sized to this machine.
        chunks_per_actor: work is cut into about this many chunks per actor; each actor holds
            one running and one queued, and pulls the next as it finishes, so fast and slow
            actors end together.
        max_replacements: actors that may be replaced within one generation before the
            failure is reported (an actor that dies while starting would otherwise be
            replaced for ever).
        timeout: seconds an actor with work may go without returning a chunk before it is
            declared dead (a hung node, a stopped process), killed and replaced. New actors
            (which build the run's envs and networks) may take ``max(timeout, 60)`` s to start.
        on_chunk: called as ``on_chunk(self, actor_index)`` after each chunk (tests inject
            faults with it).
    """

    def __init__(self, replicas: Callable, optimizer, obs_norm=None, *, population: int,
                 use_gpu: bool = False, actors: int = 0, address: str = "",
                 chunks_per_actor: int = 4, max_replacements: int | None = None,
                 timeout: float = 120.0, on_chunk=None):
        init(address)  # first: it sets what ray reads when imported
        ray = ray_module()
        self.replicas, self.optimizer, self.obs_norm = replicas, optimizer, obs_norm
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        total = int(ray.cluster_resources().get("CPU", 0))
        self.num_actors = actors or len(nodes)
        if self.num_actors > total:  # Ray would wait for CPUs that never come
            shutdown()
            raise ConfigError(f"{self.num_actors} Ray actors need a CPU each but the cluster has "
                              f"{total}; use --ray-actors {max(total, 1)} or fewer")
        self.cpus = max(1, total // self.num_actors)
        self.timeout = timeout
        self.start_timeout = max(timeout, 60.0)
        self.gpus = ray.cluster_resources().get("GPU", 0) / self.num_actors if use_gpu else 0
        self.chunks_per_actor, self.on_chunk = chunks_per_actor, on_chunk
        # each actor's pipeline is sized for the chunks it gets, not the whole population
        self.members = -(-population // (self.num_actors * chunks_per_actor))
        self.max_replacements = (2 * self.num_actors if max_replacements is None
                                 else max_replacements)
        self.log = Log()
        self._last: Tell | None = None  # what the last evaluate returned, not yet logged
        self.bootstrap_bytes = 0  # optimizer state shipped to start actors
        self.actors: list = []
        self._sent: dict = {}  # actor -> the log position it has been sent up to
        self._starting: dict = {}  # object ref of pid() -> an actor that has not answered
        self.replaced = 0  # actors started to replace dead ones
        self.counts = np.zeros(0, dtype=np.int64)  # results kept per member, last evaluate

    def _spawn(self):
        ray = ray_module()
        state = self.optimizer.state_dict()
        norm = None if self.obs_norm is None else self.obs_norm.state_dict()
        self.bootstrap_bytes += len(pickle.dumps((self.replicas, state, norm)))
        cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(Worker)
        actor = cls.remote(self.replicas, state, norm, self.log.end, self.cpus, self.members)
        self.actors.append(actor)
        self._sent[actor] = self.log.end
        return actor

    def _start(self) -> None:
        """Actors start at the first evaluation, from the optimizer state as it is then (a
        resumed run has loaded its checkpoint by that time)."""
        ray = ray_module()
        fresh = [self._spawn() for _ in range(self.num_actors - len(self.actors))]
        try:
            ray.get([a.pid.remote() for a in fresh], timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise WorkerError(f"Ray actors did not start within {self.start_timeout:g} s "
                              f"(each needs {self.cpus} CPU(s)); check 'ray status' or lower "
                              "--ray-actors") from None
        except ray.exceptions.RayError as e:
            raise WorkerError(f"Ray actors failed to start: {getattr(e, 'cause', e)}") from None

    def pids(self) -> list[int]:
        self._start()
        return ray_module().get([a.pid.remote() for a in self.actors])

    def evaluate(self, jobs: list[Job], on_episode: OnEpisode | None = None
                 ) -> list[EpisodeBatch]:
        """One population at a time, the later jobs first: they are the logging episodes
        (a population outside the budget: the test phase, ES's centre) of the state that
        telling the first job's fitness will change, and each replica rebuilds them from
        its own state; they are no event of the protocol. A job's ``indices`` are not
        supported (the loop gives none)."""
        if any(job.indices is not None for job in jobs):
            raise ValueError("RayEvaluator evaluates whole populations; Job.indices is None")
        rest = [self._population(job.pop, on_episode, job.episode_cap) for job in jobs[1:]]
        return [self._population(jobs[0].pop, on_episode, jobs[0].episode_cap), *rest]

    def _population(self, pop, on_episode, episode_cap: int | None) -> EpisodeBatch:
        if self._last is not None and (self._last.generation, self._last.phase) != (
                pop.generation, pop.phase):
            self.log.append(self._last)  # told by now: actors started below already have it
            self._last = None
        self._start()
        start = time.perf_counter()
        self.log.trim(min(self._sent.values(), default=self.log.end))
        logging = None if pop.budgeted else (pop.phase, len(pop), episode_cap)
        chunks = _Chunks(self, len(pop), fingerprint(self.optimizer, self.obs_norm),
                         on_episode, logging)
        chunks.run()
        self.counts = chunks.counts
        result = EpisodeBatch.combine(chunks.parts, len(pop), time.perf_counter() - start)
        result.comm_bytes = chunks.comm
        if result.extras.get("obs_stats") and self.obs_norm is not None:
            self.log.append(Stats(result.extras["obs_stats"]))  # the loop merges them
        if logging is None:
            self._last = Tell(pop.generation, pop.phase, result.fitness,
                              result.extras.get("bc"))
        return result

    def layout(self) -> dict:
        return {"backend": "ray", "ray_actors": self.num_actors, "cpus_per_actor": self.cpus,
                "gpus_per_actor": self.gpus}

    def close(self) -> None:
        """Kill the actors, and stop the Ray instance if this process started it: no Ray
        process outlives the driver."""
        ray = ray_module()
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors, self._sent, self._starting = [], {}, {}
        shutdown()


class _Chunks:
    """One population's chunks through the actors: queued, in flight, kept exactly once;
    lost actors replaced."""

    def __init__(self, ev: RayEvaluator, n: int, check: int, on_episode, logging):
        self.ev, self.n, self.check, self.on_episode = ev, n, check, on_episode
        self.logging = logging
        size = max(1, -(-n // (len(ev.actors) * ev.chunks_per_actor)))
        self.queue = collections.deque(np.arange(i, min(i + size, n)) for i in range(0, n, size))
        self.counts = np.zeros(n, dtype=np.int64)  # results kept per member
        self.comm = self.finished = self.replaced = 0
        self.parts: list = []  # (positions kept, chunk result)
        self.flight: dict = {}  # object ref -> (actor, chunk)
        self.alive: dict = {}  # actor -> when it last returned a chunk or got work while idle

    def run(self) -> None:
        ray, ev = ray_module(), self.ev
        self.top_up()
        while self.flight or self.queue:
            ready, _ = ray.wait([*self.flight, *ev._starting], num_returns=1,
                                timeout=min(1.0, ev.timeout / 4))
            if not ready:
                for actor in self.hung():
                    self.lost(actor, f"no progress for {ev.timeout:g} s")
            elif ready[0] in ev._starting:
                self.started(ready[0])
            else:
                self.returned(ready[0])
            self.top_up()

    def _busy(self, actor) -> int:
        return sum(a is actor for a, _ in self.flight.values())

    def top_up(self) -> None:
        """Keep two chunks with every started actor: one running, one queued."""
        for actor in self.ev.actors:
            if actor in self.ev._starting.values():
                continue
            while self.queue and self._busy(actor) < 2:
                self.send(actor)

    def send(self, actor) -> None:
        ev, chunk = self.ev, self.queue.popleft()
        update = ev.log.since(ev._sent[actor], self.check)
        self.comm += len(pickle.dumps((update, chunk)))
        ev._sent[actor] = ev.log.end
        if not self._busy(actor):
            self.alive[actor] = time.monotonic()  # an idle actor's clock starts with its work
        self.flight[actor.evaluate.remote(update, chunk, self.logging)] = (actor, chunk)

    def started(self, ref) -> None:
        ray = ray_module()
        actor = self.ev._starting.pop(ref)
        try:
            ray.get(ref)
        except ray.exceptions.RayError as e:
            self.lost(actor, getattr(e, "cause", e))

    def returned(self, ref) -> None:
        ray, ev = ray_module(), self.ev
        actor, chunk = self.flight.pop(ref)
        try:
            reply = ray.get(ref)
        except ray.exceptions.RayActorError as e:
            self.queue.appendleft(chunk)
            self.lost(actor, e)
            return
        except ray.exceptions.RayTaskError as e:
            raise WorkerError(f"Ray actor {ev.actors.index(actor)} failed: "
                              f"{getattr(e, 'cause', e)}") from None
        self.comm += len(pickle.dumps(reply))
        self.alive[actor] = time.monotonic()
        indices, r = reply
        fresh = self.counts[indices] == 0  # a member's first result is the one kept
        self.counts[indices] += fresh
        self.parts.append((indices[fresh], r.select(fresh)))  # a rerun's frames count: spent
        skip = r.frames // max(1, int(r.steps.sum()))  # frames per agent step
        for i in np.flatnonzero(fresh):
            self.finished += 1
            if self.on_episode is not None:
                self.on_episode(self.finished, self.n, r.fitness[i], r.steps[i] * skip)
        if ev.on_chunk is not None:
            ev.on_chunk(ev, ev.actors.index(actor))

    def lost(self, actor, error) -> None:
        ev = self.ev
        self.replaced += 1
        if self.replaced > ev.max_replacements:
            raise WorkerError(f"Ray actors keep failing ({self.replaced} lost in one "
                              f"generation); last: {error}")
        for ref, (a, chunk) in list(self.flight.items()):
            if a is actor:
                self.queue.appendleft(chunk)
                del self.flight[ref]
        ev._starting = {r: a for r, a in ev._starting.items() if a is not actor}
        ev.actors.remove(actor)
        del ev._sent[actor]
        self.alive.pop(actor, None)
        try:
            ray_module().kill(actor, no_restart=True)  # it may be unreachable, not dead
        except Exception:  # noqa: BLE001 - already gone
            pass
        ev.replaced += 1
        new = ev._spawn()
        ev._starting[new.pid.remote()] = new  # gets work once it answers
        self.alive[new] = time.monotonic()

    def hung(self) -> list:
        """Actors with work in flight and no progress for ``timeout``, or starting for
        longer than ``start_timeout``."""
        now, ev = time.monotonic(), self.ev
        starting = set(ev._starting.values())
        busy = {a for a, _ in self.flight.values()} | starting
        return [a for a in busy if now - self.alive.get(a, now) >
                (ev.start_timeout if a in starting else ev.timeout)]
