"""Several pipelined evaluators in one process, one driver thread each: CPU data parallelism.

On a CPU, K evaluators that each run their forward passes on one torch thread, with the
population's members dealt out between them (member ``i`` to evaluator ``i % K``), beat one
evaluator whose forward passes use K threads: each thread streams its own networks' weights
with no fork/join per layer, and the emulators of one evaluator step while the others
compute (torch and the simulators release the GIL). Measured with ``neuroevo bench`` (see
experiments/bench). Fitness is the same as with one evaluator: episodes are seeded by
member index, and observation statistics are kept per member (merged in member order).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from neuroevo.engine.pipeline import PipelinedEvaluator, default_layout
from neuroevo.envs.spec import Kind
from neuroevo.errors import ConfigError
from neuroevo.evaluation import EpisodeBatch, Job, OnEpisode


class ParallelEvaluator:
    """A ``neuroevo.evaluation.Evaluator`` over ``parts`` (pipelined evaluators sharing one
    ``obs_norm``), one driver thread each."""

    def __init__(self, parts: list[PipelinedEvaluator]):
        self.parts = parts
        self._threads = ThreadPoolExecutor(len(parts), thread_name_prefix="neuroevo-driver")

    def layout(self) -> dict:
        return {**self.parts[0].layout(), "workers": len(self.parts)}

    def evaluate(self, jobs: list[Job], on_episode: OnEpisode | None = None
                 ) -> list[EpisodeBatch]:
        """``PipelinedEvaluator.evaluate`` over the parts: episode ``n`` of the pass (the
        jobs' members in order) goes to part ``n % K``."""
        job_of = np.concatenate([np.full(len(job.members()), j) for j, job in enumerate(jobs)])
        member_of = np.concatenate([job.members() for job in jobs])
        k = len(self.parts)
        shares = []  # (part, its positions in the pass, its jobs)
        for j, part in enumerate(self.parts):
            pos = np.arange(j, len(job_of), k)
            if len(pos):
                mine = [Job(job.pop, member_of[pos[job_of[pos] == i]], job.episode_cap)
                        for i, job in enumerate(jobs)]
                shares.append((part, pos, [m for m in mine if len(m.indices)]))
        lock, done = threading.Lock(), [0]

        def report(_, __, score, frames):
            with lock:  # one progress count for all parts
                done[0] += 1
                on_episode(done[0], len(job_of), score, frames)

        start = time.perf_counter()
        futures = [self._threads.submit(part.evaluate, mine, report if on_episode else None)
                   for part, _, mine in shares]
        # each part's batches come job by job, which is the order of its positions too
        parts = [(pos, EpisodeBatch.concat(f.result()))
                 for (_, pos, _), f in zip(shares, futures, strict=True)]
        whole = EpisodeBatch.combine(parts, len(job_of), time.perf_counter() - start)
        return whole.split(jobs, self.parts[0].frameskip)

    def close(self) -> None:
        for part in self.parts:  # running evaluations end at their next step (Ctrl-C)
            part._stop.set()
        self._threads.shutdown()
        for part in self.parts:
            part.close()


SMALL_NET = 1 << 15  # parameters: a MuJoCo policy this small gets one CPU driver


def default_workers(population: int, device: torch.device, traits: Kind,
                    num_params: int = SMALL_NET + 1, cpus: int = 0) -> int:
    """Driver threads: one on a GPU (its forward pass is one batch), one per CPU core (of
    ``cpus``; 0: those this process may use) on a CPU (each with its own networks on one
    torch thread), at least 8 members each. A MuJoCo task with a net of at most
    ``SMALL_NET`` parameters gets one CPU driver, whose pool steps its envs on every core:
    its forward pass is cheap, and two drivers' per-step Python would wait for each other's
    GIL between physics calls (2 cores, MLP 64-64, one driver against two: HalfCheetah
    1.25x, Hopper 1.4x, Ant 1.08x, Humanoid 1.0x; the 256-256 MLP 0.9x on HalfCheetah:
    experiments/bench/README.md)."""
    if device.type == "cuda":
        return 1
    if traits.one_driver_for_small_nets and num_params <= SMALL_NET:
        return 1
    return max(1, min(cpus or len(os.sched_getaffinity(0)), population // 8))


def available_memory(device: torch.device) -> int:
    """Bytes that new tensors on ``device`` may take (MemAvailable for the CPU)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")  # pragma: no cover


def check_fits(num_params: int, workers: int, subsets: int, slots: int,
               device: torch.device) -> None:
    """Refuse, before allocating, a slot layout whose float32 parameter storage would not fit
    in 90% of the memory available (a huge ``engine.slots`` would otherwise swap or hang)."""
    need = 4 * num_params * workers * subsets * slots
    have = available_memory(device)
    if need > 0.9 * have:
        raise ConfigError(
            f"the slot layout needs {need / 2**30:,.1f} GiB of parameter storage ({workers} "
            f"worker(s) x {subsets} subset(s) x {slots} slot(s) x {num_params:,} parameters x "
            f"4 bytes) but {have / 2**30:,.1f} GiB of {device.type} memory is available; "
            "lower engine.slots or engine.subsets (0: automatic)")


def make_evaluator(policy, env, population: int, device: torch.device, *,
                   workers: int = 0, subsets: int = 0, slots: int = 0, env_threads: int = 0,
                   carried: int = 0, **options) -> PipelinedEvaluator | ParallelEvaluator:
    """The engine as ``neuroevo run`` builds it: ``workers`` driver threads (0:
    ``default_workers``), each with the automatic layout for its share of a pass unless
    ``subsets``/``slots`` say otherwise, over pools of ``env`` (an ``EnvSpec``).

    A pass holds the population and up to ``carried`` more episodes (ES's centre, a test
    phase: the logging jobs that share its slots). Where no episode ends before the cap
    (``env.terminates`` false), each subset gets slots for its share of those too, so that a
    small population's pass runs in one wave: with 64 members, 5 centre episodes and 2 x 32
    slots, 5 episodes of 1,000 steps ran alone after the rest (HalfCheetah-v5, MLP 256-256:
    14.5-15.0k steps/s with 2 x 40 slots against 13.1-13.2k). Where episodes end early, the
    freed slots take them, and more slots only cost (Hopper-v5: 7.6-7.8k against 8.1-8.3k;
    experiments/bench/README.md). With several workers each pool gets one simulator thread
    unless ``env_threads`` says otherwise (the cores are shared). ``options`` go to every
    ``PipelinedEvaluator``."""
    workers = workers or default_workers(population, device, env.traits,
                                         policy.spec.num_params)
    auto_subsets, auto_slots = default_layout(-(-population // workers), device, env.traits)
    if not env.terminates:
        auto_slots += -(-carried // (workers * auto_subsets))
    check_fits(policy.spec.num_params, workers, subsets or auto_subsets, slots or auto_slots,
               device)
    threads = env_threads or (1 if workers > 1 else 0)
    # One torch thread per driver thread on a CPU, even a lone one: a lone driver's small
    # per-network products lose more to a fork/join per layer than a second thread gives
    # (Hopper's MLP 64-64: 1.6x with one thread; the 256-256 MLP within +-15%: see
    # experiments/bench/README.md, scripts/bench_torch_threads.py). Several drivers on a GPU
    # keep one each too, as they had; a lone GPU driver keeps the caller's.
    one = 1 if device.type == "cpu" or workers > 1 else 0
    parts = [PipelinedEvaluator(policy, env, subsets=subsets or auto_subsets,
                                slots=slots or auto_slots, threads=threads, device=device,
                                torch_threads=one, **options)
             for _ in range(workers)]
    return parts[0] if workers == 1 else ParallelEvaluator(parts)
