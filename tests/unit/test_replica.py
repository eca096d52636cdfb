"""The replica protocol without Ray: a replica that applies the driver's log asks what the
driver asks, and refuses every kind of drift with a reason."""

import pickle

import numpy as np
import pytest
import torch

from neuroevo import GA, NoiseTable, OpenAIES
from neuroevo.dist.replica import PROTOCOL, Log, Replica, Stats, Tell, Update, fingerprint
from neuroevo.errors import WorkerError
from neuroevo.policy.obsnorm import ObsNorm

NOISE = NoiseTable(seed=1, size=1 << 14)


def ga():
    return GA(40, population_size=8, truncation=3, elite_candidates=2, validation_episodes=2,
              seed=4, noise=NOISE)


def es():
    return OpenAIES(center=torch.zeros(40), population_size=8, seed=4, noise=NOISE)


def fitness(pop, k: int) -> np.ndarray:
    """Made-up returns: any numbers do, as long as the driver and the log agree."""
    return np.random.default_rng([k, len(pop)]).normal(size=len(pop))


def drive(driver, norm, log: Log, steps: int) -> None:
    """The driver's side: each phase evaluated (here: made-up fitness and statistics), its
    statistics merged and logged, then told, and the ``Tell`` logged."""
    from neuroevo.engine.obsstats import merge

    for k in range(steps):
        pop = driver.ask()
        f = fitness(pop, k)
        if norm is not None:
            stats = {m: [np.full(3, m + k, float), np.full(3, 1.0 + m), 2] for m in (0, 3)}
            merge(norm, stats)
            log.append(Stats(stats))
        driver.tell(f)
        log.append(Tell(pop.generation, pop.phase, f))


@pytest.mark.parametrize("make,with_norm", [(ga, False), (es, True)])
def test_a_replica_following_the_log_asks_what_the_driver_asks(make, with_norm):
    driver, log = make(), Log()
    norm = ObsNorm(3) if with_norm else None
    replica = Replica(make(), ObsNorm(3) if with_norm else None, applied=0)
    for _ in range(3):  # a generation of updates at a time (GA: train then validate)
        drive(driver, norm, log, steps=2)
        update = log.since(replica.applied, fingerprint(driver, norm))
        replica.apply(pickle.loads(pickle.dumps(update)))  # as it crosses a process boundary
        assert replica.applied == log.end
        a, b = driver.ask(), replica.optimizer.ask()
        assert (a.generation, a.phase) == (b.generation, b.phase)
        assert torch.equal(a.params(), b.params())
    # An update that repeats events the replica has applied changes nothing.
    replica.apply(log.since(0, fingerprint(driver, norm)))
    assert torch.equal(driver.ask().params(), replica.optimizer.ask().params())


def test_a_late_replica_starts_from_the_drivers_state_and_the_log_position():
    driver, log = ga(), Log()
    drive(driver, None, log, steps=3)
    late = Replica(ga(), None, applied=log.end)
    late.optimizer.load_state_dict(driver.state_dict())
    drive(driver, None, log, steps=2)
    late.apply(log.since(late.applied, fingerprint(driver, None)))
    assert torch.equal(driver.ask().params(), late.optimizer.ask().params())


def test_drift_is_refused_with_a_reason():
    driver, log = ga(), Log()
    drive(driver, None, log, steps=2)
    check = fingerprint(driver, None)
    with pytest.raises(WorkerError, match="protocol 99"):
        Replica(ga(), None, 0).apply(Update(99, 0, tuple(log.events), check))
    with pytest.raises(WorkerError, match=r"events 0\.\.0 never reached this worker"):
        Replica(ga(), None, 0).apply(log.since(1, check))
    told_else = [log.events[0], Tell(0, "validate", -log.events[1].fitness)]
    with pytest.raises(WorkerError, match="replica differs from the driver's"):
        Replica(ga(), None, 0).apply(Update(PROTOCOL, 0, tuple(told_else), check))
    wrong_phase = [Tell(0, "validate", log.events[0].fitness)]
    with pytest.raises(WorkerError, match=r"told generation 0 \(validate\) but this replica "
                                          r"is at generation 0 \(train\)"):
        Replica(ga(), None, 0).apply(Update(PROTOCOL, 0, tuple(wrong_phase), check))


def test_the_log_drops_only_what_every_worker_has():
    log = Log()
    for k in range(5):
        log.append(Tell(k, "train", np.zeros(1)))
    log.trim(3)
    assert (log.base, log.end, len(log.events)) == (3, 5, 2)
    assert [e.generation for e in log.since(4, 0).events] == [4]
    with pytest.raises(WorkerError, match="log position 2 was dropped"):
        log.since(2, 0)
    log.trim(1)  # a lower position never brings anything back or moves the base down
    assert (log.base, log.end) == (3, 5)


def test_a_worker_made_by_the_picklable_factory_evaluates_what_the_local_run_does():
    """The actor's whole path in this process (no Ray): the factory crosses pickle, the
    worker follows the log chunk by chunk, and its results equal the local evaluator's."""
    from neuroevo.build import Replicas, build
    from neuroevo.config import Config, override, to_dict
    from neuroevo.dist.ray_backend import Worker
    from neuroevo.evaluation import EpisodeBatch, evaluate_one

    cfg = Config()
    for key, value in {"env.id": "CartPole-v1", "net.hidden": "8", "algo.population": 8,
                       "algo.elite_candidates": 2, "algo.validation_episodes": 2,
                       "engine.device": "cpu", "seed": 5}.items():
        override(cfg, key, value)
    local, driver = build(cfg), build(cfg, local=False)
    factory = pickle.loads(pickle.dumps(Replicas(to_dict(driver.config))))
    worker = Worker(factory, driver.optimizer.state_dict(), None, applied=0, cpus=1, members=3)
    assert worker.built.evaluator.layout()["slots"] * 2 >= 3  # sized for its chunks
    log, sent, phases = Log(), 0, []
    try:
        for _ in range(3):  # train, validate, train
            pop, expected = driver.optimizer.ask(), evaluate_one(local.evaluator,
                                                               local.optimizer.ask())
            parts = []
            for chunk in np.array_split(np.arange(len(pop)), 3):
                update = log.since(sent, fingerprint(driver.optimizer, None))
                sent = log.end
                parts.append(worker.evaluate(pickle.loads(pickle.dumps(update)), chunk))
            got = EpisodeBatch.combine(parts, len(pop))
            assert np.array_equal(got.fitness, expected.fitness)
            assert np.array_equal(got.steps, expected.steps)
            driver.optimizer.tell(got.fitness)
            local.optimizer.tell(expected.fitness)
            log.append(Tell(pop.generation, pop.phase, got.fitness))
            phases.append(pop.phase)
    finally:
        worker.close()
        local.evaluator.close()
    assert phases == ["train", "validate", "train"]


def test_a_worker_lays_out_its_own_cpus_as_make_evaluator_lays_out_a_machine():
    """A driver thread per CPU of the worker's share (at least 8 members each), one
    simulator thread per pool when there are several (not ``cpus`` each: cpus x cpus
    threads), slots for each driver's share of the members, one driver stepping on every
    CPU of the share for a small MuJoCo net, and what the config sets kept."""
    from neuroevo.build import Replicas, build, fit_to_cpus
    from neuroevo.config import Config, override, to_dict

    def config(**values):
        cfg = Config()
        for key, value in {"env.id": "CartPole-v1", "net.hidden": "8", "algo.population": 32,
                           "engine.device": "cpu", **values}.items():
            override(cfg, key, value)
        return cfg

    factory = Replicas(to_dict(build(config(), local=False).config))
    for cpus, members, workers, threads in ((2, 16, 2, 1), (1, 16, 1, 1), (3, 16, 2, 1),
                                            (3, 8, 1, 3)):
        built = factory(cpus, members)
        try:
            layout = built.evaluator.layout()
            assert (layout["workers"], layout["env_threads"]) == (workers, threads), cpus
            assert layout["slots"] == members // workers  # each driver's share, one subset
        finally:
            built.evaluator.close()
    small, paper = (config(**{"env.id": "Hopper-v5", "net.hidden": h}) for h in ("64,64",
                                                                              "256,256"))
    assert (fit_to_cpus(small, 4).engine.workers, small.engine.env_threads) == (1, 4)
    assert (fit_to_cpus(paper, 4).engine.workers, paper.engine.env_threads) == (4, 1)
    cfg = config(**{"engine.workers": 1})
    assert (fit_to_cpus(cfg, 4).engine.workers, cfg.engine.env_threads) == (1, 4)
    cfg = config(**{"engine.env_threads": 3})
    assert (fit_to_cpus(cfg, 2).engine.workers, cfg.engine.env_threads) == (2, 3)  # kept
