"""The pipelined evaluator: a population's episodes over double-buffered subsets of slots.

Each subset owns an env pool (its emulators step in C++ threads) and per-slot parameter
storage. The driver thread goes round the subsets: ``recv`` one subset's step, refill its
finished slots with the next members, run the forward pass of its active slots, ``send``
the actions, and move to the next subset.

    overlap: while the driver computes subset k's forward pass, subsets != k are stepping
    their emulators (ale-py's send/recv release the GIL; torch ops release it too).

A slot whose episode ends takes the next member at once (continuous batching); a
generation ends when its last episode ends. Env seeds come from (run seed, generation,
phase, member index), so fitness does not depend on the slot, subset or thread layout.

For continuous control (OpenAI-ES on MuJoCo) the evaluator also normalises observations
with a shared ``ObsNorm``, frozen during a generation, and reports the observation statistics
of a sample of training episodes chosen by seed (the loop merges them after the generation),
and adds Gaussian action noise to training
episodes, drawn from (episode seed, step): both are layout-independent too.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from neuroevo.engine import obsstats
from neuroevo.engine.behaviour import Behaviour, check_behaviour
from neuroevo.engine.obsstats import sampled
from neuroevo.engine.slots import IDLE, Slots, episode_seed, step_normals
from neuroevo.engine.timing import StageClock
from neuroevo.envs.spec import EnvSpec, Kind
from neuroevo.errors import ConfigError, StateError, WorkerError, check_range
from neuroevo.evaluation import EpisodeBatch, Job, OnEpisode
from neuroevo.policy.batched import BatchedPolicy, SlotParams
from neuroevo.policy.heads import to_actions
from neuroevo.policy.lowrank import LowRankSlots
from neuroevo.policy.obsnorm import ObsNorm
from neuroevo.threads import torch_threads


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``auto`` -> cuda when available, else cpu; ``cuda`` without CUDA, a ``cuda:N`` beyond
    the devices there are, or any other kind of device is a clear error."""
    name = str(device or "auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda[:N], got {name!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r} requested but CUDA is not available; "
                              "use --device cpu or --device auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r} does not exist: this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s), cuda:0 to "
                              f"cuda:{torch.cuda.device_count() - 1}")
    return dev


def load_member(policy: BatchedPolicy, params: SlotParams | LowRankSlots, row: int, pop,
                member: int, device: torch.device) -> None:
    """Put ``pop``'s ``member`` into slot ``row`` of ``params``, in the cheapest form its
    population gives: low-rank factors, one fused perturbation of a shared base, or whole."""
    lowrank_slots = isinstance(params, LowRankSlots)
    low = pop.member_lowrank(member, device) if lowrank_slots else None
    # a full-rank member in low-rank slots is loaded whole (a base of its own)
    parts = None if lowrank_slots else pop.member_parts(member, device)
    if low is not None:  # the member's factors, its base shared
        params.load_lowrank(row, *low)
    elif parts is not None:  # one fused perturbation into the slot's storage
        params.load_perturbed(row, *parts)
    else:
        params.load(row, pop.member_params(member, device))
    policy.prepare(params.layers, row)


class _Subset:
    def __init__(self, pool, slots: SlotParams):
        self.pool, self.params, self.slots = pool, slots, Slots(slots.num_rows)
        self.in_flight = False  # a step was sent and not yet received
        self.resetting: Future | None = None  # a reset running in the helper thread
        self.obs: np.ndarray | None = None  # [slots, *obs_shape] latest observations
        self.seed = np.zeros(slots.num_rows, dtype=np.int64)  # [slots] episode seed
        self.sampled = np.zeros(slots.num_rows, dtype=bool)  # [slots] feeds the obs stats
        self.training = np.zeros(slots.num_rows, dtype=bool)  # [slots] gets action noise
        self.cap = np.zeros(slots.num_rows, dtype=np.int64)  # [slots] its episode's step cap


class PipelinedEvaluator:
    """The local engine, a ``neuroevo.evaluation.Evaluator``: one episode per member,
    fitness = episode return.

    Args:
        policy: the population forward pass (template + spec).
        env: what to evaluate on (``neuroevo.envs.env_spec``): its pools, action space,
            episode cap and frame skip.
        subsets: number of double-buffered subsets (>= 1; 2 or more overlap).
        slots: slots per subset.
        threads: simulator threads per pool (0: the env kind's default).
        device: where slot parameters live and forward passes run.
        seed: the run seed that episode seeds derive from.
        async_resets: reset envs in helper threads (default: on unless the device is the CPU,
            where they compete with the forward pass for the same cores).
        obs_norm: normalise observations with it (frozen during an evaluation), and report
            the observation statistics of the training episodes that ``obs_stats_fraction``
            of them samples (paper: 0.01) in ``extras["obs_stats"]``; the loop merges them.
        action_noise: std of Gaussian noise added to continuous actions in training
            episodes (paper, MuJoCo: 0.01); never in validation or play.
        torch_threads: torch threads for the forward passes while an evaluation runs (0: the
            calling thread's). ``make_evaluator`` gives one to every CPU driver and to each
            of several GPU drivers.
    """

    def __init__(self, policy: BatchedPolicy, env: EnvSpec, *, subsets: int = 2,
                 slots: int = 32, threads: int = 0, device="auto", seed: int = 0,
                 async_resets: bool | None = None, obs_norm: ObsNorm | None = None,
                 obs_stats_fraction: float = 0.01, action_noise: float = 0.0,
                 torch_threads: int = 0, behaviour: Behaviour | None = None):
        check_range("obs_stats_fraction", obs_stats_fraction, 0 <= obs_stats_fraction <= 1,
                    "in [0, 1]")
        check_range("action_noise", action_noise, action_noise >= 0, ">= 0")
        check_range("subsets", subsets, isinstance(subsets, int) and subsets >= 1, ">= 1")
        check_range("slots", slots, isinstance(slots, int) and slots >= 1, ">= 1")
        self.policy, self.env, self.threads = policy, env, threads
        self.episode_cap, self.frameskip = env.episode_cap, env.frameskip
        self.device, self.seed = resolve_device(device), seed
        self.obs_norm, self.obs_stats_fraction = obs_norm, obs_stats_fraction
        self.action_noise, self.torch_threads = action_noise, torch_threads
        self.behaviour = behaviour
        # One subset has nothing to compute while its envs step: it steps them itself.
        self.subsets = [_Subset(env.make_pool(slots, threads, inline=subsets == 1),
                                policy.slot_storage(slots, self.device))
                        for _ in range(subsets)]
        if async_resets is None:
            async_resets = self.device.type != "cpu"
        self._resetter = (ThreadPoolExecutor(subsets, thread_name_prefix="neuroevo-reset")
                          if async_resets else None)
        self._stop = threading.Event()  # set by close(): an evaluation in another thread ends
        self.action_shape, self.action_dtype = env.action.shape, env.action.dtype

    def layout(self) -> dict:
        """The machine layout this evaluator runs (``run.json`` records it)."""
        return {"device": str(self.device), "kernels": str(self.policy.kernels), "workers": 1,
                "subsets": len(self.subsets), "slots": self.subsets[0].params.num_rows,
                "env_threads": self.threads}

    def close(self) -> None:
        self._stop.set()
        if self._resetter is not None:
            self._resetter.shutdown()
        for sub in self.subsets:
            sub.pool.close()

    def evaluate(self, jobs: list[Job], on_episode: OnEpisode | None = None
                 ) -> list[EpisodeBatch]:
        """One episode of every member of each job, in one pass: their episodes share the
        slots, so a small job (an ES centre's episodes, a test phase) fills slots that a
        lone pass would leave idle. Each episode is what it would be alone (seeded by its
        own population's generation, phase and member; its own cap; action noise and
        observation statistics only in training jobs, of which there is at most one).
        Episodes are cut at their job's ``episode_cap`` (default: the env spec's training
        cap; test episodes run to the env's own limit). ``on_episode(done, total, score,
        frames)`` is called as each episode ends. One batch per job (``EpisodeBatch.split``:
        the pass's costs on the first)."""
        with torch_threads(self.torch_threads):
            return self._evaluate(jobs, on_episode)

    def _evaluate(self, jobs: list[Job], on_episode) -> list[EpisodeBatch]:
        run = Pass(self, jobs, on_episode)
        for sub in self.subsets:
            sub.slots = Slots(sub.params.num_rows)
            self._refill(run, sub, np.arange(sub.params.num_rows))
        slots = sum(sub.params.num_rows for sub in self.subsets)
        while any(sub.in_flight or sub.resetting for sub in self.subsets):
            if self._stop.is_set():  # Ctrl-C in the main thread while this is a driver thread
                raise StateError("the evaluator was closed during an evaluation")
            run.offered += slots  # a round: each subset steps at most once; idle slots count
            for i, sub in enumerate(self.subsets):
                if sub.resetting is not None:
                    if not sub.resetting.done() and any(o.in_flight for o in self.subsets):
                        continue  # serve the subsets that are stepping first
                    self._take_reset(run, sub, i)
                elif sub.in_flight:
                    self._collect(run, sub)
                else:
                    continue
                if sub.resetting is None and sub.slots.count:
                    self._act(run, sub)
        extras = {"obs_stats": run.stats} if run.stats else {}
        if run.bc is not None:
            extras["bc"] = run.bc
        batch = EpisodeBatch(run.fitness, run.steps, 0, time.perf_counter() - run.start,
                             run.clock.totals(), run.computed, run.offered, extras=extras)
        return batch.split(jobs, self.frameskip)

    def _refill(self, run: Pass, sub: _Subset, free: np.ndarray) -> None:
        """Give free envs the next members and restart them from their seeds."""
        mask = np.zeros(len(sub.slots.member), dtype=bool)
        seeds = []
        for env in free:
            if run.next_member >= len(run.job_of):
                if sub.slots.member[env] != IDLE:
                    move = sub.slots.stop(env)
                    if move:
                        sub.params.move(*move)
                continue
            t = run.clock.mark()
            n = run.next_member
            j, member = run.job_of[n], int(run.member_of[n])
            job = run.jobs[j]
            load_member(self.policy, sub.params, sub.slots.start(env, n), job.pop, member,
                        self.device)
            run.clock.add("decode", t, run.clock.mark())
            mask[env] = True
            seed = episode_seed(self.seed, job.pop.generation, job.pop.phase, member)
            seeds.append(seed)
            training = run.training[j]
            sub.seed[env], sub.training[env], sub.cap[env] = seed, training, run.caps[j]
            sub.sampled[env] = (training and run.normalize is not None
                                and sampled(seed, self.obs_stats_fraction))
            run.next_member += 1
        if not mask.any():
            return
        seeds = np.array(seeds, dtype=np.int64)
        if self._resetter is not None:
            # overlap: seeded resets reload the ROM (tens of ms); they run in a helper
            # thread (the GIL is released) while the driver serves the other subsets.
            sub.resetting = self._resetter.submit(sub.pool.reset, mask, seeds)
        else:
            # On a CPU the reset would only take cores from the forward pass.
            t = time.perf_counter()
            sub.resetting = Future()
            sub.resetting.set_result(sub.pool.reset(mask, seeds))
            run.clock.add("reset", t, time.perf_counter())

    def _take_reset(self, run: Pass, sub: _Subset, i: int) -> None:
        """The observations of a subset's finished reset."""
        t = time.perf_counter()
        try:
            sub.obs = sub.resetting.result()
        except Exception as e:
            raise WorkerError(f"subset {i}: resetting its envs failed: {e}") from e
        finally:
            sub.resetting = None
        run.clock.add("reset", t, time.perf_counter())

    def _act(self, run: Pass, sub: _Subset) -> None:
        """Forward pass of the running episodes' rows, then send every env its action."""
        count = sub.slots.count
        envs = sub.slots.env_of[:count]  # [count] env of each computed row
        t0 = run.clock.mark()
        rows = sub.obs[envs]  # [count, *obs_shape]
        for k in np.flatnonzero(sub.sampled[envs]):  # a few episodes feed the statistics
            obsstats.add(run.stats, int(run.member_of[sub.slots.member[envs[k]]]), rows[k])
        obs = torch.from_numpy(rows).to(self.device, non_blocking=True)
        if run.normalize is not None:
            obs = run.normalize(obs)
        t1 = run.clock.mark()
        out = self.policy.forward(sub.params.prefix(count), obs)  # [count, outputs]
        t2 = run.clock.mark()
        noise = noisy = None
        if self.action_noise and self.env.action.box:
            noisy = np.flatnonzero(sub.training[envs])  # rows of training episodes
            if len(noisy):
                noise = self.action_noise * step_normals(
                    sub.seed[envs[noisy]], sub.slots.steps[envs[noisy]], out.shape[1])
        actions = np.zeros((len(sub.slots.member), *self.action_shape), self.action_dtype)
        actions[envs] = to_actions(out, self.env.action, noise, noisy)  # idle envs: zeros
        t3 = run.clock.mark()
        run.clock.add("h2d", t0, t1)
        run.clock.add("forward", t1, t2)
        run.clock.add("d2h", t2, t3)
        run.computed += count
        t = time.perf_counter()
        sub.pool.send(actions)  # a one-subset evaluator's envs step here, in this thread
        run.clock.add("env_wait", t, time.perf_counter())
        sub.in_flight = True

    def _collect(self, run: Pass, sub: _Subset) -> None:
        """Receive a subset's step, record the episodes it ended and refill their slots."""
        t = time.perf_counter()
        sub.obs, rewards, done = sub.pool.recv()
        sub.in_flight = False
        t1 = time.perf_counter()
        run.clock.add("env_wait", t, t1)
        ended = sub.slots.step(rewards, done, sub.cap)
        if self.behaviour is not None and len(ended):
            run.record_behaviour(sub.slots.member[ended],
                                 self.behaviour(sub.pool, ended, sub.obs[ended]))
        for env in ended:
            m = sub.slots.member[env]
            run.fitness[m], run.steps[m] = sub.slots.ret[env], sub.slots.steps[env]
            run.finished += 1
            if run.on_episode is not None:
                run.on_episode(run.finished, len(run.job_of), run.fitness[m],
                               run.steps[m] * self.frameskip)
        run.clock.add("bookkeeping", t1, time.perf_counter())
        if len(ended):
            self._refill(run, sub, ended)


class Pass:
    """The state of one ``evaluate`` call (of this evaluator or ``engine.warp``'s): its
    members, results, counters. Episode ``n`` of the pass is member ``member_of[n]`` of job
    ``job_of[n]``."""

    def __init__(self, ev, jobs: list[Job], on_episode):
        self.jobs, self.on_episode = jobs, on_episode
        members = [job.members() for job in jobs]
        self.member_of = np.concatenate(members) if members else np.zeros(0, np.int64)
        self.job_of = np.repeat(np.arange(len(jobs)), [len(m) for m in members])
        no_cap = np.iinfo(np.int64).max
        self.caps = [job.episode_cap or ev.episode_cap or no_cap for job in jobs]
        self.training = [job.pop.phase == "train" and getattr(job.pop, "budgeted", True)
                         for job in jobs]
        if sum(self.training) > 1:
            raise StateError("evaluate got more than one training population; their "
                             "observation statistics would mix: evaluate them one by one")
        self.normalize = ev.obs_norm.frozen(ev.device) if ev.obs_norm is not None else None
        self.stats: dict[int, list] = {}  # member -> [sum, sumsq, count] of its observations
        self.fitness = np.zeros(len(self.job_of))
        self.steps = np.zeros(len(self.job_of), dtype=np.int64)
        self.bc: np.ndarray | None = None  # [episodes, d] behaviour characterisations
        self.clock = StageClock(ev.device)
        self.computed = self.offered = self.next_member = self.finished = 0
        self.start = time.perf_counter()

    def record_behaviour(self, episodes: np.ndarray, bc: np.ndarray) -> None:
        """The behaviour characterisations of the pass's ``episodes``, checked."""
        if self.bc is None:
            self.bc = np.zeros((len(self.job_of), bc.shape[1]), np.float32)
        check_behaviour(bc, len(episodes), self.bc.shape[1],
                        lambda k: (int(self.member_of[episodes[k]]),
                                   self.jobs[self.job_of[episodes[k]]].pop))
        self.bc[episodes] = bc


def default_layout(population_size: int, device: torch.device, traits: Kind
                   ) -> tuple[int, int]:
    """``(subsets, slots)`` for an env of these ``traits`` (``EnvSpec.traits``). On a GPU,
    four subsets overlap the forward passes with the emulators. On a CPU, pools with threads
    of their own (ale-py) get two subsets (its threads step one while the driver computes
    the other), slots sized so every core has work; a MuJoCo or gymnasium env one subset of
    up to 64 slots, stepped by the driver thread itself: its networks are cheap, its
    per-step Python costs the same for 8 envs as for 64, and the other driver threads keep
    the cores busy (measured: experiments/bench)."""
    cores = os.cpu_count() or 1
    if device.type == "cpu" and not traits.own_threads:
        return 1, max(1, min(64, population_size))
    subsets = 4 if device.type == "cuda" else 2
    slots = max(1, min(64 if device.type == "cuda" else max(8, 8 * cores),
                       -(-population_size // subsets)))
    return subsets, slots
