"""What a sweep explores, checked before Ray starts (``neuroevo.sweep.space``)."""

import pytest

from neuroevo import train
from neuroevo.errors import ConfigError
from neuroevo.sweep.space import Range, every_row, make_plan

CARTPOLE = ("env.id=CartPole-v1", "engine.device=cpu", "net.hidden=8", "algo.population=8")


def plan(algo="es", grid=(), ranges=(), seeds="0", generations=6, frames=None, search=None,
         samples=None, scheduler="fifo", metric=None, pbt_interval=None, grace=None,
         sets=CARTPOLE):
    return make_plan(algo, sets=sets, grid=grid, ranges=ranges, seeds=seeds,
                     generations=generations, frames=frames, search=search, samples=samples,
                     scheduler=scheduler, metric=metric, pbt_interval=pbt_interval,
                     grace_period=grace)


def test_grid_values_take_the_config_types_and_defaults_fill_in():
    p = plan(grid=["algo.sigma=0.01,0.05", "algo.population=8,16"], seeds="0,2")
    assert p.grid == (("algo.sigma", (0.01, 0.05)), ("algo.population", (8, 16)))
    assert p.seeds == (0, 2) and p.swept == ("algo.sigma", "algo.population")
    assert p.metric == "center_score" and p.search == "grid"
    cfg = p.trial_config({"algo.sigma": 0.05}, 2)
    assert (cfg.algo.sigma, cfg.seed, cfg.budget.generations) == (0.05, 2, 6)
    assert plan("ga", grid=["algo.sigma=0.01"]).metric == "elite_score"


def test_ranges_schedulers_and_their_defaults():
    p = plan(ranges=["algo.sigma=log:0.005:0.1", "algo.population=int:4:12"], samples=5)
    assert p.search == "random" and p.samples == 5
    assert p.ranges == (Range("algo.sigma", "log", 0.005, 0.1),
                        Range("algo.population", "int", 4, 12))
    assert plan(ranges=["algo.lr=uniform:0.001:0.01"], samples=2).ranges[0].kind == "lin"
    pbt = plan(ranges=["algo.sigma=log:0.005:0.1"], samples=4, scheduler="pbt",
               generations=40)
    assert pbt.pbt_interval == 4
    asha = plan(ranges=["algo.sigma=log:0.005:0.1"], samples=4, scheduler="asha",
                frames=90_000, generations=None)
    assert (asha.time_attr, asha.grace_period) == ("frames", 10_000)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(ranges=["algo.sigma=log:0.01:0.1"], grid=["algo.lr=0.1"]), "--range goes with"),
    (dict(ranges=["algo.sigma=log:0.01:0.1"], samples=0), "the number of points, >= 1"),
    (dict(grid=["algo.sigma=0.1"], seeds="0,1,0"), "--seeds takes distinct"),
    (dict(grid=["algo.sigma=0.1"], scheduler="pbt"), "perturbs the --range keys"),
    (dict(ranges=["algo.population=int:4:12"], samples=2, scheduler="pbt"),
     "cannot change algo.population"),
    (dict(grid=["algo.sigma=0.1"], metric="elite_scor"), "unknown metric 'elite_scor'"),
    (dict(grid=["algo.sigma=0.1"], metric="elite_score"), "do not report elite_score"),
    (dict(grid=["algo.sigma=0.1"], metric="test_score",
          sets=(*CARTPOLE, "algo.test_episodes=0")), "needs a test phase"),
    (dict(grid=["algo.sigma=0.1"], metric="test_score", scheduler="asha",
          sets=(*CARTPOLE, "algo.test_every=2")), "add --set algo.test_every=1"),
    (dict(search="random", samples=2), "give at least one --range"),
    (dict(grid=["algo.sigma=0.1"], search="grid", samples=3), "--samples goes with"),
    (dict(grid=["algo.sigmaa=0.1"]), "unknown config key 'algo.sigmaa'"),
    (dict(grid=["algo.truncation=2,3"]), "algo.truncation is set but not used"),
    (dict(grid=["seed=1,2"]), "give --seeds"),
    (dict(grid=["algo.sigma=0.1"], generations=None), "--generations N or --frames N"),
    (dict(ranges=["algo.sigma=log:0:0.1"], samples=2), "log needs lo > 0"),
    (dict(grid=["algo.sigma=0.1"], pbt_interval=2), "--pbt-interval goes with"),
    (dict(ranges=["algo.sigma=log:0.01:0.1"], samples=2, scheduler="pbt",
          pbt_interval=6), "leaves no perturbation"),
    (dict(ranges=["algo.sigma=log:0.01:0.1"], samples=2, search="optuna",
          scheduler="pbt"), "use --search random with it"),
    (dict(ranges=["env.id=lin:0:1"], samples=2), "env.id is not a number"),
    (dict(ranges=["algo.population=lin:5:10"], samples=2), "write algo.population=int:lo"),
    (dict(), "give the values to sweep")])
def test_bad_plans_say_what_to_do(kwargs, needle):
    with pytest.raises(ConfigError) as e:
        plan(**kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("algo,sets", [
    ("es", ()), ("ga", ()), ("rs", ()), ("es", ("algo.validation_episodes=0",)),
    ("ga", ("algo.test_episodes=1", "algo.test_every=1"))])
def test_every_row_names_only_keys_that_every_row_has(algo, sets):
    """The schedulers' metric check against the rows of real runs."""
    cfg = plan(algo, grid=["algo.population=8"], sets=(*CARTPOLE, *sets),
               generations=2).trial_config({}, 0)
    rows = train(cfg).history
    assert len(rows) == 2
    for row in rows:
        assert every_row(cfg) <= set(row), every_row(cfg) - set(row)
