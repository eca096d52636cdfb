"""The Atari pool and the pipelined evaluator against independent references."""

import numpy as np
import pytest
import torch
from torch.func import functional_call

from neuroevo import GA, NoiseTable, OpenAIES
from neuroevo.config import EnvConfig
from neuroevo.engine import PipelinedEvaluator
from neuroevo.engine.slots import episode_seed
from neuroevo.envs.atari import AtariConfig, AtariPool
from neuroevo.envs.base import random_play
from neuroevo.envs.spec import env_spec
from neuroevo.errors import StateError, UnknownName
from neuroevo.evaluation import evaluate_one
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.nets import build_template

CAP = 150


@pytest.fixture(scope="module", params=["breakout", "space_invaders"])
def setup(request):
    # breakout: episodes end at different times (refill order matters); space_invaders:
    # rewards in every episode (scores must add up exactly).
    env = env_spec(EnvConfig(game=request.param, episode_cap=CAP))
    template, spec = build_template("small", env.obs_shape, env.action.outputs)
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=7, truncation=2,
            elite_candidates=0, seed=3, noise=NoiseTable.shared(size=1 << 25))
    return env, template, spec, ga.ask()


def naive_episode(config, net, seed):
    """One network (``net``: observations -> outputs), one fresh env, batch of 1, a plain
    loop: the reference fitness."""
    env = AtariPool(config.atari, 1, num_threads=1)
    obs = env.reset(np.ones(1, bool), [seed])
    total, steps = 0.0, 0
    while True:
        with torch.no_grad():
            out = net(torch.from_numpy(obs))
        env.send(out.argmax(1).numpy().astype(np.int32))
        obs, reward, done = env.recv()
        total, steps = total + float(reward[0]), steps + 1
        if done[0] or steps >= CAP:
            env.close()
            return total, steps


def plain(template, spec, params):
    weights = spec.unflatten(params)
    return lambda obs: functional_call(template, weights, (obs,))


def evaluate(setup, subsets, slots, threads, async_resets=False):
    config, template, spec, pop = setup
    torch.set_num_threads(threads)
    try:
        ev = PipelinedEvaluator(BatchedPolicy(template, spec), config, subsets=subsets,
                                slots=slots, threads=threads, device="cpu", seed=5,
                                async_resets=async_resets)
        result = evaluate_one(ev, pop)
        ev.close()
        return result
    finally:
        torch.set_num_threads(2)


def test_partial_reset_replays_a_fresh_env():
    config = AtariConfig("breakout", episode_cap=None)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 4, 80).astype(np.int32)
    fresh = AtariPool(config, 1, num_threads=1)
    ref = [fresh.reset(np.ones(1, bool), [77])[0]]
    for a in actions:
        fresh.send(np.array([a], dtype=np.int32))
        ref.append(fresh.recv()[0][0])
    pool = AtariPool(config, 3, num_threads=2)
    pool.reset(np.ones(3, bool), [1, 2, 3])
    for _ in range(25):  # other history first: it must not leak into env 1's next episode
        pool.send(rng.integers(0, 4, 3).astype(np.int32))
        pool.recv()
    got = [pool.reset(np.array([False, True, False]), [77])[1]]
    for a in actions:
        pool.send(np.array([rng.integers(0, 4), a, rng.integers(0, 4)], dtype=np.int32))
        got.append(pool.recv()[0][1])
    assert all(np.array_equal(x, y) for x, y in zip(got, ref, strict=True))


def test_pool_protocol_errors_and_unknown_games():
    with pytest.raises(UnknownName, match=r"unknown Atari game 'brekout'; did you mean 'breakout'"):
        AtariConfig("brekout")
    pool = AtariPool(AtariConfig("pong"), 2, num_threads=1)
    with pytest.raises(StateError, match=r"send\(\) before reset\(\)"):
        pool.send(np.zeros(2, dtype=np.int32))
    pool.reset(np.ones(2, bool), [0, 1])
    with pytest.raises(StateError, match=r"recv\(\) without send\(\)"):
        pool.recv()
    pool.send(np.zeros(2, dtype=np.int32))
    with pytest.raises(StateError, match=r"send\(\) twice without recv\(\)"):
        pool.send(np.zeros(2, dtype=np.int32))
    with pytest.raises(StateError, match=r"reset\(\) while a step is in flight"):
        pool.reset(np.ones(2, bool), [0, 1])
    with pytest.raises(ValueError, match=r"a mask of 2 envs and a seed per masked env"):
        AtariPool(AtariConfig("pong"), 2, num_threads=1).reset(np.ones(2, bool), [0])


def test_engine_equals_a_naive_loop_and_refills_slots(setup):
    config, template, spec, pop = setup
    result = evaluate(setup, subsets=2, slots=2, threads=2)  # 7 members through 4 slots
    for i in range(len(pop)):
        seed = episode_seed(5, pop.generation, pop.phase, i)
        ret, steps = naive_episode(config, plain(template, spec, pop.member_params(i)), seed)
        assert (result.fitness[i], result.steps[i]) == (ret, steps), i
    assert result.frames == 4 * result.steps.sum() and result.steps.max() <= CAP
    assert result.fitness.any() or result.steps.min() < CAP  # the comparison is not vacuous
    assert 0 < result.occupancy <= 1


@pytest.mark.slow
def test_fitness_does_not_depend_on_subsets_slots_or_threads(setup):
    a = evaluate(setup, subsets=1, slots=7, threads=1)
    b = evaluate(setup, subsets=2, slots=2, threads=2)
    c = evaluate(setup, subsets=3, slots=1, threads=1)
    d = evaluate(setup, subsets=2, slots=3, threads=2, async_resets=True)
    for other in (b, c, d):
        assert np.array_equal(a.fitness, other.fitness) and np.array_equal(a.steps, other.steps)


def test_vbn_engine_equals_a_naive_loop_in_any_layout():
    """OpenAI-ES's small net with virtual batch normalisation: each slot's folded moments
    give the fitness of the template's own VBN forward, one network at a time, and the same
    fitness whatever the layout."""
    env = env_spec(EnvConfig(game="breakout", episode_cap=CAP))
    template, spec = build_template("small", env.obs_shape, env.action.outputs, vbn=True)
    pool = env.make_pool(1, 1)
    batch = torch.from_numpy(random_play(pool, env.action.n, 0, 128))
    pool.close()
    policy = BatchedPolicy(template, spec, reference_batch=batch)
    center = torch.randn(spec.num_params, generator=torch.Generator().manual_seed(0))
    pop = OpenAIES(center=center * spec.init_std(), population_size=6, seed=2,
                   noise=NoiseTable.shared(size=1 << 25)).ask()
    results = []
    for subsets, slots, threads in ((1, 6, 1), (2, 2, 2)):
        torch.set_num_threads(threads)
        try:
            ev = PipelinedEvaluator(policy, env, subsets=subsets, slots=slots,
                                    threads=threads, device="cpu", seed=5)
            results.append(evaluate_one(ev, pop))
            ev.close()
        finally:
            torch.set_num_threads(2)
    a, b = results
    assert np.array_equal(a.fitness, b.fitness) and np.array_equal(a.steps, b.steps)
    for i in range(len(pop)):
        p = pop.member_params(i)[None]
        seed = episode_seed(5, pop.generation, pop.phase, i)
        assert naive_episode(env, lambda obs, p=p: policy.reference(p, obs), seed) == \
            (a.fitness[i], a.steps[i]), i
    assert a.fitness.any() or a.steps.min() < CAP  # the comparison is not vacuous


def test_low_rank_es_on_the_small_net_does_not_depend_on_the_layout():
    """ES at rank 1 with the conv net: slots hold factors (the conv corrections grouped per
    row); the rows are the same with 1 subset of 4 slots and with 2 subsets of 1 slot."""
    from neuroevo import train

    common = dict(algo__name="es", env__game="pong", net__name="small", algo__rank=1,
                  algo__population=4, env__episode_cap=25, algo__validation_episodes=1,
                  algo__test_episodes=0, engine__device="cpu", budget__generations=2, seed=1)
    keys = ("fitness_mean", "fitness_max", "center_score", "frames")
    a = train(**common, engine__subsets=1, engine__slots=4).history
    b = train(**common, engine__subsets=2, engine__slots=1).history
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]
