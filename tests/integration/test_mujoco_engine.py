"""OpenAI-ES on the batched MuJoCo pools: the pipelined evaluator against a naive loop over
gymnasium's own env, and layout independence with observation statistics and action noise."""

import gymnasium
import numpy as np
import pytest
import torch
from torch.func import functional_call

from neuroevo.build import build
from neuroevo.config import Config, override
from neuroevo.engine.slots import episode_seed, step_normals
from neuroevo.evaluation import Job, evaluate_one
from neuroevo.loop import merge_observations


def _config(**overrides) -> Config:
    cfg = Config()
    for key, value in {"algo.name": "es", "env.id": "Hopper-v5", "algo.population": 6,
                       "engine.device": "cpu", "net.hidden": "16,16", "seed": 3,
                       "env.obs_stats_fraction": 1.0, **overrides}.items():
        override(cfg, key, value)
    return cfg


def _naive_episode(built, params, seed, normalize, noise_std):
    """One episode, one network, one gymnasium env, a plain loop."""
    env = gymnasium.make("Hopper-v5")
    obs, _ = env.reset(seed=seed)
    layers = built.policy.spec.unflatten(params)
    low, high = env.action_space.low, env.action_space.high
    total, seen, t = 0.0, [], 0
    while True:
        x = torch.from_numpy(obs.astype(np.float32))
        seen.append(x.double())
        out = functional_call(built.policy.template, layers, (normalize(x)[None],))[0].numpy()
        noise = noise_std * step_normals(np.array([seed]), np.array([t]), len(out))[0]
        obs, reward, term, trunc, _ = env.step(np.clip(out + noise, low, high).astype(np.float32))
        total, t = total + reward, t + 1
        if term or trunc:
            return total, t, torch.stack(seen)


def test_es_episodes_equal_a_naive_loop_over_gymnasium():
    built = build(_config())
    norm = built.evaluator.obs_norm
    assert norm is not None and built.evaluator.action_noise == 0.01  # auto for MuJoCo
    rng = np.random.default_rng(0)  # statistics that make the normalisation matter
    norm.update(torch.from_numpy(rng.normal(0.5, 3.0, (50, 11))))
    before = norm.state_dict()
    normalize = norm.frozen("cpu")
    pop = built.optimizer.ask()
    result = evaluate_one(built.evaluator, pop)
    assert norm.state_dict()["count"] == before["count"]  # evaluators only report
    merge_observations(norm, result)  # what the loop does after a training phase
    seen = []
    for i in range(len(pop)):
        seed = episode_seed(3, pop.generation, "train", i)
        ret, steps, obs = _naive_episode(built, pop.member_params(i), seed, normalize, 0.01)
        assert result.fitness[i] == pytest.approx(ret, rel=1e-5, abs=1e-4)
        assert result.steps[i] == steps
        seen.append(obs)
    seen = torch.cat(seen)  # every observation of every training episode (fraction 1.0)
    assert norm.count == pytest.approx(before["count"] + len(seen))
    # The batched simulator and gymnasium's agree to about 1e-8 relative in observations
    # (fitness above: 1e-5), so their sums do too.
    torch.testing.assert_close(norm.sum, before["sum"] + seen.sum(0), rtol=1e-7, atol=1e-6)
    torch.testing.assert_close(norm.sumsq, before["sumsq"] + (seen**2).sum(0), rtol=1e-7,
                               atol=1e-6)
    assert built.optimizer.tell(result.fitness)["generation_done"]
    pop = built.optimizer.center_population()  # the updated centre's logging episodes
    assert pop.phase == "validate" and not pop.budgeted and len(pop) == 5
    assert torch.equal(pop.member_params(0), built.optimizer.center)
    result = evaluate_one(built.evaluator, pop)
    assert "obs_stats" not in result.extras  # validation episodes leave the statistics alone
    ret, _, _ = _naive_episode(built, built.optimizer.center,
                               episode_seed(3, pop.generation, "validate", 0),
                               norm.frozen("cpu"), 0.0)  # and carry no action noise
    assert result.fitness[0] == pytest.approx(ret, rel=1e-5, abs=1e-4)
    built.evaluator.close()


def test_a_shared_pass_gives_each_job_what_it_gets_alone():
    """The next generation's training episodes (action noise, statistics) and the centre's
    and a test phase's logging episodes in one pass over 2 subsets of 3 slots: each
    episode equals its lone evaluation bit for bit, and only training reports statistics."""
    built = build(_config(**{"engine.subsets": 2, "engine.slots": 3,
                             "env.obs_stats_fraction": 0.5}))
    ev, es = built.evaluator, built.optimizer
    first = evaluate_one(ev, es.ask())
    merge_observations(built.obs_norm, first)
    es.tell(first.fitness)
    jobs = [Job(es.ask()), Job(es.center_population()), Job(es.test_population(3), None, 40)]
    before = built.obs_norm.state_dict()
    shared = ev.evaluate(jobs)
    alone = [ev.evaluate([j])[0] for j in jobs]
    after = built.obs_norm.state_dict()
    for s, a in zip(shared, alone, strict=True):
        assert np.array_equal(s.fitness, a.fitness) and np.array_equal(s.steps, a.steps)
        assert s.frames == a.frames
    assert shared[2].steps.max() <= 40  # the test job's own cap
    assert all(torch.equal(before[k], after[k]) for k in ("sum", "sumsq"))  # only reported
    assert shared[0].extras["obs_stats"] and (shared[0].extras["obs_stats"].keys() ==
                                              alone[0].extras["obs_stats"].keys())
    for m, (total, squares, count) in shared[0].extras["obs_stats"].items():
        want = alone[0].extras["obs_stats"][m]
        assert np.array_equal(total, want[0]) and np.array_equal(squares, want[1])
        assert count == want[2]
    assert all("obs_stats" not in r.extras for r in (*shared[1:], *alone[1:]))
    assert shared[0].wall_time > 0 and shared[1].wall_time == shared[2].wall_time == 0
    # occupancy: every agent step is one computed row; every round offers all 2 x 3 slots
    assert shared[0].computed == sum(int(r.steps.sum()) for r in shared)
    assert shared[0].offered % 6 == 0 and shared[0].offered > shared[0].computed
    ev.close()


def _run(subsets=2, slots=3, centre_episodes=2, workers=1):
    from neuroevo.loop import Budget, generations

    cfg = _config(**{"engine.subsets": subsets, "engine.slots": slots, "engine.workers": workers,
                     "env.obs_stats_fraction": 0.5, "algo.validation_episodes": centre_episodes})
    built = build(cfg)
    rows = list(generations(built.optimizer, built.evaluator, Budget(generations=2),
                            obs_norm=built.obs_norm))
    built.evaluator.close()
    return rows, built.obs_norm.state_dict(), built.optimizer.center


@pytest.mark.parametrize("layout", [(1, 1), (2, 2), (3, 4), (1, 2, 2, 2), (2, 1, 2, 3)])
def test_fitness_and_statistics_do_not_depend_on_the_layout(layout):
    keys = ("fitness_mean", "fitness_max", "center_score", "frames", "eval_frames")
    (rows, norm, center), (rows2, norm2, center2) = _run(), _run(*layout)
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in rows2]
    assert all(torch.equal(norm[k], norm2[k]) for k in ("sum", "sumsq"))
    assert torch.equal(center, center2)


def test_centre_episodes_are_logged_apart_and_change_nothing():
    (rows, norm, center), (plain, norm0, center0) = _run(), _run(centre_episodes=0)
    keys = ("fitness_mean", "fitness_max", "frames", "episodes")
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in plain]
    assert all(torch.equal(norm[k], norm0[k]) for k in ("sum", "sumsq"))
    assert torch.equal(center, center0)
    assert all(r["eval_frames"] > 0 and "center_score" in r for r in rows)
    assert all("eval_frames" not in r and "center_score" not in r for r in plain)


class OneByOne:
    """An evaluator that gives each job a pass of its own, as Ray's does (what every
    evaluator did before logging episodes shared the next generation's pass)."""

    def __init__(self, evaluator):
        self.evaluator = evaluator

    def evaluate(self, jobs, on_episode=None):
        return [self.evaluator.evaluate([job], on_episode)[0] for job in jobs]

    def layout(self):
        return self.evaluator.layout()

    def close(self):
        self.evaluator.close()


def test_logging_episodes_in_the_next_pass_leave_every_row_as_it_was():
    from neuroevo.loop import Budget, Tests, generations

    keys = ("generation", "frames", "episodes", "fitness_mean", "fitness_max", "center_score",
            "eval_frames", "test_score", "test_score_std", "test_episodes", "test_frames")
    cfg = _config(**{"engine.subsets": 2, "engine.slots": 3, "algo.validation_episodes": 2,
                     "algo.test_episodes": 2, "algo.test_every": 2})
    histories, centers = [], []
    for wrap in (lambda ev: ev, OneByOne):
        built = build(cfg)
        rows = generations(built.optimizer, wrap(built.evaluator), Budget(generations=3),
                           tests=Tests.of(built.config), obs_norm=built.obs_norm)
        built.evaluator.close()
        histories.append(rows)
        centers.append(built.optimizer.center)
    shared, alone = histories
    assert [[r.get(k) for k in keys] for r in shared] == [[r.get(k) for k in keys] for r in alone]
    assert [("test_score" in r) for r in shared] == [False, True, True]  # every 2, and the last
    assert all("center_score" in r and r["eval_frames"] > 0 for r in shared)
    assert torch.equal(*centers)
    # the centre's 2 episodes fill slots of the next pass instead of a pass of their own
    assert np.mean([r["occupancy"] for r in shared]) > np.mean([r["occupancy"] for r in alone])


@pytest.mark.parametrize("layout", [(2, 2, 1), (1, 3, 2)])
def test_low_rank_es_does_not_depend_on_the_layout_and_equals_materialised_members(layout):
    """ES at rank 1: the slots hold factors and share the centre; every episode is the same
    whatever the subsets, slots and workers, and equals the materialised member's (the
    full-rank slots) to float tolerance."""
    from neuroevo.loop import Budget, generations
    from neuroevo.policy.lowrank import LowRankSlots

    def run(subsets, slots, workers, rank_slots=True):
        built = build(_config(**{"algo.rank": 1, "engine.subsets": subsets,
                                 "engine.slots": slots, "engine.workers": workers,
                                 "algo.validation_episodes": 1}))
        parts = getattr(built.evaluator, "parts", [built.evaluator])
        assert all(isinstance(s.params, LowRankSlots) for p in parts for s in p.subsets)
        if not rank_slots:  # the reference: every member materialised into per-slot weights
            built.policy.lowrank = None
            for p in parts:
                for s in p.subsets:
                    s.params = built.policy.slot_storage(s.params.num_rows)
        rows = generations(built.optimizer, built.evaluator, Budget(generations=2),
                           obs_norm=built.obs_norm)
        built.evaluator.close()
        return rows, built.optimizer.center

    keys = ("fitness_mean", "fitness_max", "fitness_min", "center_score", "frames")
    (rows, center), (rows2, center2) = run(1, 6, 1), run(*layout)
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in rows2]
    assert torch.equal(center, center2)
    materialised, _ = run(1, 6, 1, rank_slots=False)
    for r, m in zip(rows, materialised, strict=True):
        assert r["fitness_mean"] == pytest.approx(m["fitness_mean"], rel=1e-4)


def test_low_rank_ga_does_not_depend_on_the_layout():
    """GA at rank 1: children in low-rank slots share their parents' bases; the rows are the
    same for one subset of 8 slots and for two workers of 2 subsets of 2."""
    from neuroevo.loop import Budget, generations

    def run(subsets, slots, workers):
        built = build(_config(**{"algo.name": "ga", "algo.rank": 1, "algo.population": 8,
                                 "algo.elite_candidates": 2, "algo.validation_episodes": 1,
                                 "engine.subsets": subsets, "engine.slots": slots,
                                 "engine.workers": workers}))
        rows = generations(built.optimizer, built.evaluator, Budget(generations=3),
                           obs_norm=built.obs_norm)
        built.evaluator.close()
        return rows

    keys = ("fitness_mean", "fitness_max", "elite_score", "frames")
    assert [[r[k] for k in keys] for r in run(1, 8, 1)] == \
        [[r[k] for k in keys] for r in run(2, 2, 2)]


def test_a_small_mujoco_net_gets_one_cpu_driver_whose_pool_steps_on_every_core():
    import os

    from neuroevo.engine.parallel import SMALL_NET, default_workers
    from neuroevo.envs.spec import KINDS

    cpu, cores = torch.device("cpu"), len(os.sched_getaffinity(0))
    mujoco, atari = KINDS["mujoco"], KINDS["atari"]
    assert default_workers(64, cpu, mujoco, SMALL_NET) == 1
    assert default_workers(64, cpu, mujoco, SMALL_NET + 1) == min(cores, 8)
    assert default_workers(64, cpu, atari, 1000) == min(cores, 8)
    assert default_workers(64, torch.device("cuda"), mujoco, SMALL_NET + 1) == 1
    small = build(_config(**{"algo.population": 64, "net.hidden": "64,64"}))
    large = build(_config(**{"algo.population": 64, "net.hidden": "256,256"}))
    try:
        assert small.policy.spec.num_params <= SMALL_NET < large.policy.spec.num_params
        assert small.layout()["workers"] == 1
        assert [s.pool.sims.threads for s in small.evaluator.subsets] == [cores]
        assert large.layout()["workers"] == min(cores, 8)
    finally:
        small.evaluator.close()
        large.evaluator.close()


def test_the_round_profiler_sees_every_env_step_of_the_generation():
    """scripts/profile_mujoco_rounds.py: the env-steps of its timed rounds are the frames
    the evaluator counted, and its bins by running envs add up to them."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "profile_mujoco_rounds.py"
    spec = importlib.util.spec_from_file_location("profile_mujoco_rounds", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    timer = script.RoundTimer()
    try:
        r = script.profile("Hopper-v5", 1, 1, timer)
    finally:
        timer.close()
    assert r["steps_per_generation"] == r["frames_per_generation"] > 64
    assert sum(b["steps"] for b in r["by_active_envs"]) == r["steps_per_generation"]
    assert sum(b["rounds"] for b in r["by_active_envs"]) == r["rounds_per_generation"]


def test_where_no_episode_ends_early_a_pass_with_its_logging_episodes_runs_in_one_wave():
    """HalfCheetah never terminates: its layout has slots for the population, the centre's
    episodes and a test phase's, so the pass of the population and the centre takes as many
    rounds as one episode has steps. Hopper's episodes end early and free their slots: its
    layout stays the population's."""
    sets = {"algo.population": 6, "algo.validation_episodes": 2, "algo.test_episodes": 3,
            "engine.workers": 1, "env.episode_cap": 4}
    built = build(_config(**{"env.id": "HalfCheetah-v5", **sets}))
    try:
        assert built.evaluator.layout()["slots"] == 6 + 2 + 3
        pop = built.optimizer.ask()
        first, center = built.evaluator.evaluate(
            [Job(pop), Job(built.optimizer.center_population())])
        assert list(first.steps) == [4] * 6 and list(center.steps) == [4] * 2
        # 4 stepping rounds and the round that collects them: one wave
        assert first.offered == (4 + 1) * 11
    finally:
        built.evaluator.close()
    two_waves = build(_config(**{"env.id": "HalfCheetah-v5", "engine.slots": 6, **sets}))
    try:
        first, _ = two_waves.evaluator.evaluate(
            [Job(two_waves.optimizer.ask()), Job(two_waves.optimizer.center_population())])
        assert first.offered == 2 * (4 + 1) * 6
    finally:
        two_waves.evaluator.close()
    hopper = build(_config(**sets))
    try:
        assert hopper.evaluator.layout()["slots"] == 6
    finally:
        hopper.evaluator.close()
