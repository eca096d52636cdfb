"""The MuJoCo Warp evaluator: physics, observations, rewards and the population's forward pass
on one device, the sibling of ``PipelinedEvaluator`` behind the same ``Evaluator`` protocol.

World ``w`` of a ``WarpSims`` (``neuroevo.envs.warp``) runs one episode at a time, and the
networks of the running episodes fill parameter rows ``[0, count)`` (``Slots``, as in the
pipelined engine), so each step's forward pass reads a prefix of the storage in place and
computes no network whose episode has ended (ragged-episode masking). A step is torch ops on
the device only: gather the running worlds' observations, normalise them (``ObsNorm``,
frozen for the pass), the forward pass, the action noise of training episodes
(``step_normals_tensor``: keyed by episode seed and step, as the pipelined engine's),
clipping, the physics, and the bookkeeping of returns, steps, ends (termination, the task's
time limit, the job's cap), the sampled episodes' observation sums and the BCs, written to
per-episode rows when an episode ends (worlds whose episode did not end write a spare row,
so no step reads a mask on the host).

Every ``chunk`` steps the host reads which worlds ended (one ``[worlds]`` transfer) and gives
them the next members: their networks are loaded into rows (``load_member``), and their
restarts are drawn on the host from the episodes' seeds (gymnasium's initial-state noise,
``mujoco.initial_state``, once per episode) and copied to the device. An ended world idles
(masked, its action zero) until that check, so a chunk trades up to ``chunk - 1`` idle steps
per episode for host round trips: occupancy reports it. At the end of the pass fitness,
steps, observation sums and BCs cross to the host once.

Seeds follow the pipelined engine's rule, ``episode_seed(run, generation, phase, member)``,
and each world's physics is its own (Warp's deterministic contact and constraint order), so
a warp run is reproducible and independent of the number of worlds. It is not the native
engine's run: float32 physics (``envs.warp``); tests/integration/test_warp.py measures the
two against each other.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from neuroevo.engine.behaviour import Behaviour
from neuroevo.engine.obsstats import sampled
from neuroevo.engine.parallel import available_memory
from neuroevo.engine.pipeline import Pass, load_member, resolve_device
from neuroevo.engine.slots import IDLE, Slots, episode_seed, step_normals_tensor
from neuroevo.engine.timing import StageClock
from neuroevo.envs.mujoco import initial_state
from neuroevo.envs.spec import EnvSpec
from neuroevo.envs.warp import WarpSims, compile_notice, memory_need
from neuroevo.errors import ConfigError, StateError, check_range
from neuroevo.evaluation import EpisodeBatch, Job, OnEpisode
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.obsnorm import ObsNorm
from neuroevo.threads import torch_threads

CHUNK = 4  # device steps between the host's checks for ended episodes (a GPU step of
# 4,096 Humanoid worlds takes milliseconds: a check every 4 costs little, idling costs more)
MAX_WORLDS = 4096  # engine.slots=0: a world per episode of the largest pass, up to this


def warp_worlds(episodes: int) -> int:
    """``engine.slots=0``'s worlds for passes of up to ``episodes`` episodes: one each, so a
    pass runs in one wave (a GPU steps all worlds in the time of a few), up to
    ``MAX_WORLDS``."""
    return max(1, min(episodes, MAX_WORLDS))
STAGES = ("decode", "reset", "forward", "physics", "bookkeeping")
DEVICE_STAGES = ("decode", "forward", "physics", "bookkeeping")


class _EndStates:
    """What a ``Behaviour`` asks of a pool, for the episodes of a pass: ``behaviour(rows)``,
    the built-in BC of those episodes as the device recorded it at their last step."""

    def __init__(self, bc: np.ndarray):
        self.bc = bc

    def behaviour(self, rows: np.ndarray) -> np.ndarray:
        return self.bc[rows]


class _Worlds:
    """The device state of a pass: per world (``[W]``) and per episode (``[E + 1]``, row
    ``E`` the spare row that worlds without a finished episode write)."""

    def __init__(self, ev: WarpEvaluator, episodes: int):
        W, E, D, dev = ev.worlds, episodes, ev.env.obs_shape[0], ev.device
        i64, f64 = dict(dtype=torch.int64, device=dev), dict(dtype=torch.float64, device=dev)
        self.active = torch.zeros(W, dtype=torch.bool, device=dev)
        self.ended = torch.zeros(W, dtype=torch.bool, device=dev)  # since the last check
        self.episode = torch.full((W,), E, **i64)  # its episode of the pass, E: none
        self.elapsed, self.cap, self.seed = (torch.zeros(W, **i64) for _ in range(3))
        self.ret = torch.zeros(W, **f64)
        self.noisy, self.sampled = (torch.zeros(W, dtype=torch.bool, device=dev)
                                    for _ in range(2))
        self.obs = ev.sims.observe().float()  # [W, D] each world's latest observation
        self.fitness, self.steps = torch.zeros(E + 1, **f64), torch.zeros(E + 1, **i64)
        self.stats = ev.stats_wanted
        if self.stats:
            self.osum, self.osq = torch.zeros(W, D, **f64), torch.zeros(W, D, **f64)
            self.ocount = torch.zeros(W, **i64)
            self.ep_sum, self.ep_sq = torch.zeros(E + 1, D, **f64), torch.zeros(E + 1, D, **f64)
            self.ep_count = torch.zeros(E + 1, **i64)
        self.bc = ev.behaviour is not None
        if self.bc:
            self.ep_bc = torch.zeros(E + 1, 2, **f64)
            self.ep_obs = torch.zeros(E + 1, D, dtype=torch.float32, device=dev)


class WarpEvaluator:
    """A ``neuroevo.evaluation.Evaluator`` on MuJoCo Warp: one episode per member, fitness
    = episode return, on the six v5 locomotion tasks.

    Args:
        policy: the population forward pass (template + spec).
        env: the task's spec (``env_spec``; kind ``mujoco``).
        worlds: Warp worlds, one episode each at a time (``engine.slots``).
        device: where worlds, parameter rows and forward passes live.
        seed, obs_norm, obs_stats_fraction, action_noise, behaviour, torch_threads: as
            ``PipelinedEvaluator``'s.
        chunk: device steps between the host's checks for ended episodes (module docstring).
    """

    def __init__(self, policy: BatchedPolicy, env: EnvSpec, *, worlds: int, device="auto",
                 seed: int = 0, obs_norm: ObsNorm | None = None,
                 obs_stats_fraction: float = 0.01, action_noise: float = 0.0,
                 behaviour: Behaviour | None = None, torch_threads: int = 0,
                 chunk: int = CHUNK):
        check_range("worlds", worlds, isinstance(worlds, int) and worlds >= 1, ">= 1")
        check_range("chunk", chunk, isinstance(chunk, int) and chunk >= 1, ">= 1")
        check_range("obs_stats_fraction", obs_stats_fraction, 0 <= obs_stats_fraction <= 1,
                    "in [0, 1]")
        check_range("action_noise", action_noise, action_noise >= 0, ">= 0")
        if env.kind != "mujoco":
            raise ConfigError(f"--sim warp runs the MuJoCo locomotion tasks, not the {env.kind} "
                              f"env {env.name!r}; use --sim native")
        self.policy, self.env, self.worlds, self.chunk = policy, env, worlds, chunk
        self.episode_cap, self.frameskip = env.episode_cap, env.frameskip
        self.device, self.seed = resolve_device(device), seed
        self.obs_norm, self.obs_stats_fraction = obs_norm, obs_stats_fraction
        self.action_noise, self.behaviour = action_noise, behaviour
        self.torch_threads = torch_threads
        self.stats_wanted = obs_norm is not None and obs_stats_fraction > 0
        notice = compile_notice(self.device)
        if notice:
            print(notice, file=sys.stderr, flush=True)
        self.sims = WarpSims(env.name, worlds, self.device,
                             keep=("xipos",) if behaviour is not None else ())
        self.params = policy.slot_storage(worlds, self.device)
        low, high = env.action.bounds()
        self.low, self.high = (torch.from_numpy(b).double().to(self.device) for b in (low, high))
        self._stop = False

    @staticmethod
    def check_fits(env_id: str, worlds: int, num_params: int, device: torch.device) -> None:
        """Refuse, before allocating, ``worlds`` whose Data and float32 parameter rows would
        not fit in 90% of the device memory available."""
        sims, rows = memory_need(env_id, worlds), 4 * num_params * worlds
        have = available_memory(device)
        if sims + rows > 0.9 * have:
            raise ConfigError(
                f"{worlds:,} Warp worlds need {(sims + rows) / 2**30:,.1f} GiB "
                f"({sims / 2**30:,.1f} GiB of {env_id} Data, {rows / 2**30:,.1f} GiB of "
                "parameter rows) but "
                f"{have / 2**30:,.1f} GiB of {device.type} memory is available; lower "
                "engine.slots (0: automatic)")

    def layout(self) -> dict:
        """The machine layout this evaluator runs (``run.json`` records it)."""
        return {"device": str(self.device), "kernels": str(self.policy.kernels), "workers": 1,
                "subsets": 1, "slots": self.worlds, "env_threads": 0, "sim": "warp"}

    def close(self) -> None:
        self._stop = True

    def evaluate(self, jobs: list[Job], on_episode: OnEpisode | None = None
                 ) -> list[EpisodeBatch]:
        """``PipelinedEvaluator.evaluate``'s contract: one episode of every member of each
        job in one pass, each what it would be alone; one batch per job."""
        with torch_threads(self.torch_threads), torch.no_grad():
            return self._evaluate(jobs, on_episode)

    def _evaluate(self, jobs: list[Job], on_episode) -> list[EpisodeBatch]:
        run = Pass(self, jobs, on_episode)
        run.clock = StageClock(self.device, STAGES, DEVICE_STAGES)
        slots, state = Slots(self.worlds), _Worlds(self, len(run.job_of))
        self._refill(run, slots, state, np.arange(self.worlds))
        while slots.count:
            if self._stop:
                raise StateError("the evaluator was closed during an evaluation")
            rows = torch.from_numpy(slots.env_of[:slots.count].copy()).to(self.device)
            for _ in range(self.chunk):
                self._step(run, state, rows)
            t = time.perf_counter()
            ended = np.flatnonzero(state.ended.cpu().numpy())  # sync: the check
            state.ended.zero_()
            self._report(run, slots, state, ended)
            run.clock.add("bookkeeping", t, time.perf_counter())
            self._refill(run, slots, state, ended)
        self._results(run, state)
        batch = EpisodeBatch(run.fitness, run.steps, 0, time.perf_counter() - run.start,
                             run.clock.totals(), run.computed, run.offered,
                             extras=self._extras(run, state))
        return batch.split(jobs, self.frameskip)

    def _step(self, run: Pass, s: _Worlds, rows: torch.Tensor) -> None:
        """One agent step of every world, the networks of ``rows``' worlds computed."""
        count = len(rows)
        t0 = run.clock.mark()
        obs = s.obs[rows]  # [count, D]
        if run.normalize is not None:
            obs = run.normalize(obs)
        out = self.policy.forward(self.params.prefix(count), obs).double()  # [count, A]
        if self.action_noise:
            noise = step_normals_tensor(s.seed[rows], s.elapsed[rows], out.shape[1])
            out = out + torch.where(s.noisy[rows, None], self.action_noise * noise, 0.0)
        actions = torch.zeros(self.worlds, out.shape[1], dtype=torch.float32,
                              device=self.device)
        actions[rows] = torch.clamp(out, self.low, self.high).float()
        actions = torch.where(s.active[:, None], actions, 0.0)  # idle worlds: zeros
        t1 = run.clock.mark()
        if s.stats:  # the observations the networks saw, before normalisation
            m = (s.active & s.sampled)[:, None]
            o = s.obs.double()
            s.osum += torch.where(m, o, 0.0)
            s.osq += torch.where(m, o * o, 0.0)
            s.ocount += m[:, 0]
        reward, terminated = self.sims.step(actions, s.active)
        t2 = run.clock.mark()
        s.ret += torch.where(s.active, reward, 0.0)
        s.elapsed += s.active
        done = s.active & (terminated | (s.elapsed >= s.cap))
        s.active &= ~done
        s.ended |= done
        s.obs = self.sims.observe().float()
        at = torch.where(done, s.episode, len(s.fitness) - 1)  # the spare row unless ended
        s.fitness[at], s.steps[at] = s.ret, s.elapsed
        if s.stats:
            s.ep_sum[at], s.ep_sq[at], s.ep_count[at] = s.osum, s.osq, s.ocount
        if s.bc:
            s.ep_bc[at], s.ep_obs[at] = self.sims.behaviour(), s.obs
        run.clock.add("forward", t0, t1)
        run.clock.add("physics", t1, t2)
        run.clock.add("bookkeeping", t2, run.clock.mark())
        run.computed += count
        run.offered += self.worlds

    def _report(self, run: Pass, slots: Slots, s: _Worlds, ended: np.ndarray) -> None:
        """Count the episodes of ``ended`` worlds as finished (``on_episode`` gets their
        scores: one more transfer, only when someone listens)."""
        if not len(ended):
            return
        episodes = slots.member[ended]
        run.finished += len(ended)
        if run.on_episode is None:
            return
        at = torch.from_numpy(episodes).to(self.device)
        scores, steps = s.fitness[at].cpu().numpy(), s.steps[at].cpu().numpy()
        for k in range(len(ended)):
            run.on_episode(run.finished - len(ended) + k + 1, len(run.job_of),
                           float(scores[k]), int(steps[k]) * self.frameskip)

    def _refill(self, run: Pass, slots: Slots, s: _Worlds, free: np.ndarray) -> None:
        """Give ``free`` worlds the next members and restart them from their seeds; idle the
        rest."""
        t = run.clock.mark()
        starts, seeds, episodes, caps, noisy, sample = [], [], [], [], [], []
        for w in free:
            if run.next_member >= len(run.job_of):
                if slots.member[w] != IDLE:
                    move = slots.stop(w)
                    if move:
                        self.params.move(*move)
                continue
            n = run.next_member
            j, member = run.job_of[n], int(run.member_of[n])
            job = run.jobs[j]
            load_member(self.policy, self.params, slots.start(w, n), job.pop, member,
                        self.device)
            seed = episode_seed(self.seed, job.pop.generation, job.pop.phase, member)
            training = run.training[j]
            starts.append(w)
            seeds.append(seed)
            episodes.append(n)
            caps.append(min(run.caps[j], self.env.max_steps))
            noisy.append(training and self.env.action.box)
            sample.append(training and run.normalize is not None
                          and sampled(seed, self.obs_stats_fraction))
            run.next_member += 1
        run.clock.add("decode", t, run.clock.mark())
        if not starts:
            return
        t = time.perf_counter()
        self._restart(s, np.array(starts), seeds, episodes, caps, noisy, sample)
        run.clock.add("reset", t, time.perf_counter())

    def _restart(self, s: _Worlds, worlds: np.ndarray, seeds, episodes, caps, noisy,
                 sample) -> None:
        """Restart ``worlds`` at their episodes' initial states, their counters at zero."""
        from gymnasium.utils.seeding import np_random

        sims, dev = self.sims, self.device
        qpos = np.zeros((self.worlds, len(sims.init_qpos)))
        qvel = np.zeros((self.worlds, len(sims.init_qvel)))
        for w, seed in zip(worlds, seeds, strict=True):
            qpos[w], qvel[w] = initial_state(sims.task, sims.init_qpos, sims.init_qvel,
                                             np_random(int(seed))[0])
        mask = np.zeros(self.worlds, dtype=bool)
        mask[worlds] = True
        restart = torch.from_numpy(mask).to(dev)
        sims.reset(restart, torch.from_numpy(qpos).to(dev), torch.from_numpy(qvel).to(dev))
        at = torch.from_numpy(worlds).to(dev)
        s.obs = torch.where(restart[:, None], sims.observe().float(), s.obs)
        for name, values in (("episode", episodes), ("cap", caps), ("seed", seeds)):
            getattr(s, name)[at] = torch.tensor(values, dtype=torch.int64, device=dev)
        s.noisy[at] = torch.tensor(noisy, device=dev)
        s.sampled[at] = torch.tensor(sample, device=dev)
        s.elapsed[at], s.ret[at], s.active[at] = 0, 0.0, True
        if s.stats:
            s.osum[at], s.osq[at], s.ocount[at] = 0.0, 0.0, 0

    def _results(self, run: Pass, s: _Worlds) -> None:
        """The pass's fitness and steps, in one transfer each."""
        run.fitness[:] = s.fitness[:-1].cpu().numpy()
        run.steps[:] = s.steps[:-1].cpu().numpy()

    def _extras(self, run: Pass, s: _Worlds) -> dict:
        """Observation statistics of the sampled episodes and BCs, as the pipelined engine
        reports them."""
        extras: dict = {}
        if s.stats:
            counts = s.ep_count[:-1].cpu().numpy()
            mine = np.flatnonzero(counts)
            sums, sqs = s.ep_sum[:-1].cpu().numpy(), s.ep_sq[:-1].cpu().numpy()
            stats = {int(run.member_of[n]): [sums[n], sqs[n], int(counts[n])] for n in mine}
            if stats:
                extras["obs_stats"] = stats
        if s.bc:
            episodes = np.arange(len(run.job_of))
            bc = self.behaviour(_EndStates(s.ep_bc[:-1].cpu().numpy().astype(np.float32)),
                                episodes, s.ep_obs[:-1].cpu().numpy())
            run.record_behaviour(episodes, np.asarray(bc, dtype=np.float32))
            extras["bc"] = run.bc
        return extras
