"""The Ray backend on a local Ray instance: the same metrics as the local backend for any
number of actors, seed-only messages, and a killed actor's work done exactly once."""

import os
import signal

import numpy as np
import pytest

from neuroevo import train
from neuroevo.evaluation import evaluate_one

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # starts local Ray clusters

ray = pytest.importorskip("ray")

KEYS = ("generation", "frames", "episodes", "fitness_max", "fitness_mean", "fitness_min",
        "elite_score", "center_score", "best_fitness", "test_score", "test_score_std",
        "test_frames")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=128 << 20)
    yield
    ray.shutdown()


def metrics(rows):
    return [{k: r.get(k) for k in KEYS} for r in rows]


def run(backend, actors=0, **overrides):
    return train(engine__backend=backend, engine__ray_actors=actors, engine__device="cpu",
                 **overrides).history


CARTPOLE = dict(algo__name="ga", env__id="CartPole-v1", algo__population=12, seed=4,
                algo__elite_candidates=2, algo__validation_episodes=2, budget__generations=3,
                algo__test_episodes=3, algo__test_every=1)  # tests in actors too


def test_cartpole_ga_equals_local_with_one_and_two_actors():
    local = run("local", **CARTPOLE)
    one, two = run("ray", 1, **CARTPOLE), run("ray", 2, **CARTPOLE)
    assert metrics(one) == metrics(local) and metrics(two) == metrics(local)
    # Messages are seeds, indices and fitness: a few KB per generation, whatever D is.
    assert all(0 < r["bytes_per_generation"] < 20_000 for r in two)


def test_small_atari_run_equals_local():
    # breakout to 120 steps: lives are lost, so FIRE on life loss (the default) is pressed
    breakout = dict(algo__name="ga", env__game="breakout", algo__population=6,
                    env__episode_cap=120, env__test_episode_cap=120, algo__test_episodes=2,
                    algo__elite_candidates=2, algo__validation_episodes=2,
                    budget__generations=2, engine__slots=2)
    assert metrics(run("ray", 2, **breakout)) == metrics(run("local", **breakout))


def test_es_with_observation_statistics_equals_local():
    hopper = dict(algo__name="es", env__id="Hopper-v5", algo__population=8, seed=2,
                  net__hidden="16,16", env__obs_stats_fraction=0.5,
                  algo__validation_episodes=2, budget__generations=3)
    assert metrics(run("ray", 2, **hopper)) == metrics(run("local", **hopper))


@pytest.mark.parametrize("name", ["pgpe", "sepcma"])
def test_the_newer_centre_methods_equal_local(name):
    """PGPE and sep-CMA-ES members are seeds too: the actors' replicas follow the driver's
    per-parameter stds and covariance through the replica protocol."""
    hopper = dict(algo__name=name, env__id="Hopper-v5", algo__population=8, seed=3,
                  net__hidden="16,16", algo__validation_episodes=2, budget__generations=3)
    local = run("local", **hopper)
    ray_rows = run("ray", 2, **hopper)
    assert metrics(ray_rows) == metrics(local)
    assert [r["stdev_mean"] for r in ray_rows] == [r["stdev_mean"] for r in local]


@pytest.mark.parametrize("name", ["nsres", "gans"])
def test_novelty_search_equals_local(name):
    """The members' behaviour travels back from the actors and into the replicas' tells
    (the NS family's archive and centre choice, GA-NS's archive and parents)."""
    maze = dict(algo__name=name, env__id="HardMaze-v0", algo__population=10, seed=1,
                net__hidden="8", budget__generations=3, algo__test_episodes=1)
    local, ray_rows = run("local", **maze), run("ray", 2, **maze)
    assert metrics(ray_rows) == metrics(local)
    assert [r["archive_size"] for r in ray_rows] == [r["archive_size"] for r in local]
    assert [r["novelty_mean"] for r in ray_rows] == [r["novelty_mean"] for r in local]


def test_novelty_search_on_atari_s_ram_equals_local():
    """Each actor's pools keep RAM replicas of their own, seeded per episode as the driver's
    would be: the same behaviours, so the same archive, novelty and centres."""
    frostbite = dict(algo__name="nsres", env__game="frostbite", algo__population=6, seed=2,
                     env__episode_cap=100, env__test_episode_cap=100, algo__test_episodes=1,
                     budget__generations=3, engine__slots=2)
    local, ray_rows = run("local", **frostbite), run("ray", 2, **frostbite)
    assert metrics(ray_rows) == metrics(local)
    for key in ("archive_size", "novelty_mean", "center_index", "center_reward"):
        assert [r[key] for r in ray_rows] == [r[key] for r in local], key
    assert all(r["novelty_mean"] > 0 for r in local)  # the behaviours are not all one


def test_a_killed_actor_is_replaced_and_every_member_evaluated_exactly_once():
    from neuroevo.build import build, ray_evaluator
    from neuroevo.config import Config, override

    cfg = Config()
    for key, value in {"algo.name": "ga", "env.id": "CartPole-v1", "algo.population": 24,
                       "engine.device": "cpu", "seed": 1}.items():
        override(cfg, key, value)
    local = build(cfg)
    pop = local.optimizer.ask()
    expected = evaluate_one(local.evaluator, pop).fitness
    local.evaluator.close()

    killed = []

    def kill_once(evaluator, actor):
        if not killed:  # after the first chunk: the other chunks of that actor are in flight
            pid = ray.get(evaluator.actors[actor].pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    built = build(cfg, local=False)
    ev = ray_evaluator(built, actors=2, chunks_per_actor=6, on_chunk=kill_once)
    pop = built.optimizer.ask()
    result = evaluate_one(ev, pop)
    assert killed and ev.replaced >= 1
    assert np.array_equal(ev.counts, np.ones(24))  # every member's result kept exactly once
    assert np.array_equal(result.fitness, expected)
    assert killed[0] not in ev.pids() and len(ev.actors) == 2  # the replacement is running
    built.optimizer.tell(result.fitness)
    pop = built.optimizer.ask()  # the replacement follows the log like the others
    assert pop.phase == "validate" and len(evaluate_one(ev, pop).fitness) == len(pop)
    ev.close()


def test_a_replica_out_of_step_is_refused():
    from neuroevo.build import build, ray_evaluator
    from neuroevo.config import Config, override
    from neuroevo.errors import WorkerError

    cfg = Config()
    for key, value in {"algo.name": "es", "env.id": "CartPole-v1", "algo.population": 4,
                       "algo.validation_episodes": 0, "engine.device": "cpu"}.items():
        override(cfg, key, value)
    built = build(cfg, local=False)
    ev = ray_evaluator(built, actors=1)
    fitness = evaluate_one(ev, built.optimizer.ask()).fitness
    built.optimizer.tell(fitness[::-1].copy())  # not what evaluate returned: centres differ
    with pytest.raises(WorkerError, match="replica differs from the driver's"):
        evaluate_one(ev, built.optimizer.ask())
    ev.close()
