"""Evaluation in Ray actors with seed-only messages: the one module that imports ray.

Each actor builds the run locally from its config (policy, env pools, noise table, and a
*replica of the optimizer*) and owns a pipelined ``Evaluator`` on its node's CPUs and GPU.
The driver never ships parameters during a run. Per generation it sends each actor:

- the log entries it has not seen: the fitness vectors the driver's optimizer was told
  (the replica tells them too, so its next ``ask()`` gives the same population: compact
  genomes decoded locally, parents cached) and the merged observation-statistics increments;
- chunks of member indices to evaluate, pulled by the actors as they finish (load balance);

and gets back fitness, steps, frames and per-member observation statistics. A 4-byte
fingerprint of the optimizer state and the observation statistics (ES: the centre and
Adam's moments) rides with every chunk, and an actor whose replica differs refuses the
work. The optimizer's state (for ES, the centre: a full vector) travels once, when an
actor starts.

If an actor dies mid-generation, its unfinished chunks go back to the queue, the dead actor
is killed for good, and a replacement starts from the driver's state; the replacement gets
work once it answers (Ray schedules it when resources allow) while the others go on. Each
member's result is kept exactly once. Fitness depends only on (genome, seed, index), and
statistics are merged in member order, so results equal the local backend's for any
number of actors.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import signal
import socket
import sys
import threading
import time
import zlib

import numpy as np
import torch

from neuroevo.engine.obsstats import merge as merge_obs_stats
from neuroevo.engine.pipeline import EvalResult
from neuroevo.errors import ConfigError, DependencyNotInstalled, WorkerError
from neuroevo.memory import release_free_memory


_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is 127.0.0.1
_started_here = False  # this process started the Ray instance (and shuts it down)
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a declared dependency
        raise DependencyNotInstalled("--backend ray needs ray: pip install 'ray>=2.9'") from e
    return ray


def _reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when HOST:PORT does not answer."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise ConfigError(f"cannot reach the Ray cluster at {address} ({reason}); check the "
                          "address and that 'ray status' works on that machine") from None


def init(address: str = "") -> None:
    """Join the Ray cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), or
    start a new local instance: explicitly (``address="local"``, so it never joins a cluster
    that ``RAY_ADDRESS`` or ``ray start`` left around), sized to this machine, with every
    server on 127.0.0.1 and no dashboard."""
    global _started_here
    if "ray" not in sys.modules and not address:
        os.environ[_LOOPBACK] = "0"  # read when ray is imported; Ray's processes inherit it
    ray = _ray()
    if ray.is_initialized():
        return
    if address and address != "auto":
        _reachable(address)
    # Ray installs its own handlers for SIGTERM (and others) in the driver; the caller's
    # (the CLI's: stop at once, keep the checkpoint, exit 143) are put back afterwards.
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in _SIGNALS} if main else {}
    try:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level="error")
        else:
            ray.init(address="local", num_cpus=len(os.sched_getaffinity(0)),
                     include_dashboard=False, log_to_driver=False,
                     object_store_memory=256 << 20, logging_level="error")
            _started_here = True
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"cannot start or join Ray at {address or 'this machine'!r} "
                          f"({first}); check --ray-address") from None
    finally:
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)


def shutdown() -> None:
    """Stop the Ray instance this process started (a joined cluster stays up)."""
    global _started_here
    if _started_here:
        _ray().shutdown()
        _started_here = False


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


class Worker:
    """The actor: a local build of the run that follows the driver's log."""

    def __init__(self, cfg: dict, optimizer_state: dict, obs_norm_state: dict | None,
                 applied: int, cpus: int):
        from neuroevo.build import build
        from neuroevo.config import from_dict

        torch.set_num_threads(max(1, cpus))
        config = from_dict(cfg)
        config.engine.env_threads = config.engine.env_threads or max(1, cpus)
        config.engine.workers = config.engine.workers or max(1, cpus)
        self.built = build(config)
        self.built.restore({"optimizer": optimizer_state, "obs_norm": obs_norm_state})
        self.applied = applied  # log entries already reflected in the replica
        self._print: tuple[int, int] | None = None  # (applied, fingerprint)

    def pid(self) -> int:
        return os.getpid()

    def _follow(self, start: int, entries: list) -> None:
        for k, (kind, payload) in enumerate(entries, start):
            if k < self.applied:
                continue
            if kind == "tell":
                self.built.optimizer.ask()
                self.built.optimizer.tell(payload)
            else:
                merge_obs_stats(self.built.obs_norm, payload)
            self.applied = k + 1

    def evaluate(self, start: int, entries: list, check: int, indices: np.ndarray):
        self._follow(start, entries)
        if self._print is None or self._print[0] != self.applied:
            self._print = (self.applied, fingerprint(self.built.optimizer, self.built.obs_norm))
        if self._print[1] != check:
            raise WorkerError(f"worker {os.getpid()}: its optimizer replica differs from the "
                              "driver's (was the optimizer told other fitness than evaluate "
                              "returned?)")
        pop = self.built.optimizer.ask()
        r = self.built.evaluator.evaluate(pop, indices=indices, merge_stats=False)
        release_free_memory()  # an actor's heap fragments as the driver's does
        return indices, r

    def close(self) -> None:
        self.built.evaluator.close()


class RayEvaluator:
    """An ``Evaluator`` look-alike whose episodes run in Ray actors.

    Args:
        cfg: the run's ``Config`` (actors build from it).
        optimizer: the driver's optimizer (its state boots new actors). The loop must tell
            it the fitness ``evaluate`` returned, as ``neuroevo.loop`` does.
        obs_norm: the driver's observation normaliser, or None.
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

    def __init__(self, cfg, optimizer, obs_norm=None, *, actors: int = 0, address: str = "",
                 chunks_per_actor: int = 4, max_replacements: int | None = None,
                 timeout: float = 120.0, on_chunk=None):
        from neuroevo.config import to_dict

        init(address)  # first: it sets what ray reads when imported
        ray = _ray()
        self.cfg, self.optimizer, self.obs_norm = to_dict(cfg), optimizer, obs_norm
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
        self.gpus = (ray.cluster_resources().get("GPU", 0) / self.num_actors
                     if cfg.engine.device != "cpu" else 0)
        self.chunks_per_actor, self.on_chunk = chunks_per_actor, on_chunk
        self.max_replacements = (2 * self.num_actors if max_replacements is None
                                 else max_replacements)
        self.seed = cfg.seed
        if not (cfg.engine.subsets or cfg.engine.slots):
            # each actor's pipeline is sized for the chunks it gets, not the whole population
            from neuroevo.engine.pipeline import default_layout, resolve_device

            chunk = -(-cfg.algo.population // (self.num_actors * chunks_per_actor))
            subsets, slots = default_layout(chunk, resolve_device(cfg.engine.device))
            self.cfg["engine"].update(subsets=subsets, slots=slots)
        self.log: list = []  # ("tell", fitness) and ("stats", per-member stats), in order
        self.log_base = 0  # absolute index of log[0]; entries every actor has are dropped
        self._last: tuple | None = None  # (generation, phase, fitness) of the last evaluate
        self.bootstrap_bytes = 0  # optimizer state shipped to start actors
        self.actors: list = []
        self._sent: dict = {}  # actor -> absolute log position sent to it
        self._starting: dict = {}  # object ref of pid() -> an actor that has not answered
        self.replaced = 0  # actors started to replace dead ones

    @property
    def _log_end(self) -> int:
        return self.log_base + len(self.log)

    def _spawn(self):
        ray = _ray()
        state = self.optimizer.state_dict()
        norm = None if self.obs_norm is None else self.obs_norm.state_dict()
        self.bootstrap_bytes += len(pickle.dumps((self.cfg, state, norm)))
        cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(Worker)
        actor = cls.remote(self.cfg, state, norm, self._log_end, self.cpus)
        self.actors.append(actor)
        self._sent[actor] = self._log_end
        return actor

    def _start(self) -> None:
        """Actors start at the first evaluation, from the optimizer state as it is then (a
        resumed run has loaded its checkpoint by that time)."""
        ray = _ray()
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
        return _ray().get([a.pid.remote() for a in self.actors])

    def _trim_log(self) -> None:
        done = min(self._sent.values(), default=self._log_end)
        del self.log[:done - self.log_base]
        self.log_base = done

    def evaluate(self, pop, on_episode=None) -> EvalResult:
        ray = _ray()
        self._start()
        start = time.perf_counter()
        if self._last is not None and self._last[:2] != (pop.generation, pop.phase):
            self.log.append(("tell", self._last[2]))  # what the loop told the optimizer
        self._trim_log()
        check, n = fingerprint(self.optimizer, self.obs_norm), len(pop)
        size = max(1, -(-n // (len(self.actors) * self.chunks_per_actor)))
        queue = collections.deque(np.arange(i, min(i + size, n)) for i in range(0, n, size))
        self.counts = np.zeros(n, dtype=np.int64)  # results kept per member (exactly once)
        comm = finished = replaced = 0
        parts: list = []  # (positions kept, chunk result)
        flight: dict = {}  # object ref -> (actor, chunk)
        alive: dict = {}  # actor -> when it last returned a chunk or got work while idle

        def top_up() -> None:
            """Keep two chunks with every started actor: one running, one queued."""
            for actor in self.actors:
                if actor in self._starting.values():
                    continue
                while queue and sum(a is actor for a, _ in flight.values()) < 2:
                    send(actor)

        def send(actor) -> None:
            nonlocal comm
            chunk = queue.popleft()
            args = (self._sent[actor], self.log[self._sent[actor] - self.log_base:], check,
                    chunk)
            comm += len(pickle.dumps(args))
            self._sent[actor] = self._log_end
            if not any(a is actor for a, _ in flight.values()):
                alive[actor] = time.monotonic()  # an idle actor's clock starts with its work
            flight[actor.evaluate.remote(*args)] = (actor, chunk)

        def lost(actor, error) -> None:
            nonlocal replaced
            replaced += 1
            if replaced > self.max_replacements:
                raise WorkerError(f"Ray actors keep failing ({replaced} lost in one "
                                  f"generation); last: {error}")
            for ref, (a, chunk) in list(flight.items()):
                if a is actor:
                    queue.appendleft(chunk)
                    del flight[ref]
            self._starting = {r: a for r, a in self._starting.items() if a is not actor}
            self.actors.remove(actor)
            del self._sent[actor]
            alive.pop(actor, None)
            try:
                ray.kill(actor, no_restart=True)  # it may be unreachable, not dead
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.replaced += 1
            new = self._spawn()
            self._starting[new.pid.remote()] = new  # gets work once it answers
            alive[new] = time.monotonic()

        def hung() -> list:
            """Actors with work in flight and no progress for ``timeout``, or starting for
            longer than ``start_timeout``."""
            now = time.monotonic()
            starting = set(self._starting.values())
            busy = {a for a, _ in flight.values()} | starting
            return [a for a in busy if now - alive.get(a, now) >
                    (self.start_timeout if a in starting else self.timeout)]

        top_up()
        while flight or queue:
            ready, _ = ray.wait([*flight, *self._starting], num_returns=1,
                                timeout=min(1.0, self.timeout / 4))
            if not ready:
                for actor in hung():
                    lost(actor, f"no progress for {self.timeout:g} s")
                top_up()
                continue
            [ref] = ready
            if ref in self._starting:
                actor = self._starting.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as e:
                    lost(actor, getattr(e, "cause", e))
                top_up()
                continue
            actor, chunk = flight.pop(ref)
            try:
                reply = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                queue.appendleft(chunk)
                lost(actor, e)
                top_up()
                continue
            except ray.exceptions.RayTaskError as e:
                raise WorkerError(f"Ray actor {self.actors.index(actor)} failed: "
                                  f"{getattr(e, 'cause', e)}") from None
            comm += len(pickle.dumps(reply))
            alive[actor] = time.monotonic()
            indices, r = reply
            fresh = self.counts[indices] == 0  # a member's first result is the one kept
            self.counts[indices] += fresh
            kept = dataclasses.replace(r, fitness=r.fitness[fresh], steps=r.steps[fresh])
            parts.append((indices[fresh], kept))  # a rerun's frames were spent: they count
            skip = r.frames // max(1, int(r.steps.sum()))  # frames per agent step
            for i in np.flatnonzero(fresh):
                finished += 1
                if on_episode is not None:
                    on_episode(finished, n, r.fitness[i], r.steps[i] * skip)
            if self.on_chunk is not None:
                self.on_chunk(self, self.actors.index(actor))
            top_up()
        result = EvalResult.combine(parts, n, time.perf_counter() - start)
        result.comm_bytes = comm
        if result.obs_stats and self.obs_norm is not None:
            merge_obs_stats(self.obs_norm, result.obs_stats)
            self.log.append(("stats", result.obs_stats))
        self._last = (pop.generation, pop.phase, result.fitness)
        return result

    def layout(self) -> dict:
        return {"backend": "ray", "ray_actors": self.num_actors, "cpus_per_actor": self.cpus,
                "gpus_per_actor": self.gpus}

    def close(self) -> None:
        """Kill the actors, and stop the Ray instance if this process started it: no Ray
        process outlives the driver."""
        ray = _ray()
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors, self._sent, self._starting = [], {}, {}
        shutdown()


def run_commands(commands: list[list[str]], cpus: int = 1, address: str = "",
                 cwd: str | None = None):
    """Run commands as Ray tasks (``cpus`` each) on a local instance or at ``address``, in
    ``cwd`` where it exists on the node; yields ``(index, returncode, stderr tail)`` as each
    finishes (sweeps use it; give absolute paths for a cluster's shared storage)."""
    import subprocess

    init(address)
    ray = _ray()

    @ray.remote(num_cpus=cpus)
    def run(command: list[str]) -> tuple[int, str]:
        here = cwd if cwd and os.path.isdir(cwd) else None
        out = subprocess.run(command, capture_output=True, text=True, cwd=here)
        return out.returncode, out.stderr[-2000:]

    pending = {run.remote(c): i for i, c in enumerate(commands)}
    try:
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            code, err = ray.get(ref)
            yield pending.pop(ref), code, err
    finally:
        shutdown()
