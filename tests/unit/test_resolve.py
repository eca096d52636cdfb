"""``build.resolve``: config.yaml says what ran, every default replaced by its value."""

import pytest

from neuroevo.build import build, resolve
from neuroevo.config import Config, check, override, to_dict


def config(**values):
    cfg = Config()
    for key, value in values.items():
        override(cfg, key, value)
    return cfg


@pytest.mark.parametrize("values, expected", [
    ({"algo.name": "ga", "algo.population": 64},  # Atari GA: the quick setting's defaults
     {"algo.sigma": 0.002, "algo.truncation": 12, "algo.elite_candidates": 10,
      "algo.train_episodes": 2, "net.name": "small", "env.obs_norm": "off",
      "env.action_noise": None}),
    ({"algo.name": "ga", "algo.population": 3, "env.id": "CartPole-v1"},
     {"algo.truncation": 1, "algo.elite_candidates": 3, "algo.train_episodes": 1,
      "net.name": "mlp", "env.obs_norm": "off", "env.action_noise": 0.0}),
    ({"algo.name": "ga", "algo.train_episodes": 3},  # a value given is kept
     {"algo.train_episodes": 3}),
    ({"algo.name": "gans", "env.id": "HalfCheetah-v5"}, {"algo.train_episodes": 1}),
    ({"algo.name": "es", "env.id": "HalfCheetah-v5"},  # Salimans et al.: sigma, noise, norm
     {"algo.sigma": 0.02, "algo.lr": 0.01, "algo.truncation": None, "net.name": "mlp",
      "env.obs_norm": "on", "env.action_noise": 0.01}),
    ({"algo.name": "rs", "algo.population": 100},  # keys an algorithm does not use stay None
     {"algo.sigma": None, "algo.truncation": None, "algo.lr": None,
      "algo.elite_candidates": 10, "algo.train_episodes": 2}),
    ({"algo.name": "es"}, {"algo.train_episodes": None}),
])
def test_every_default_resolved(values, expected):
    got = resolve(config(**values))
    flat = {f"{section}.{k}": v for section, d in to_dict(got).items() if isinstance(d, dict)
            for k, v in d.items()}
    assert {k: flat[k] for k in expected} == expected
    check(got)  # a resolved config is a valid config
    assert to_dict(resolve(got)) == to_dict(got)  # resolving again changes nothing
    assert got.engine == Config().engine  # the machine layout stays automatic


def test_build_runs_what_resolve_says():
    cfg = config(**{"algo.name": "ga", "algo.population": 10, "env.id": "CartPole-v1",
                    "engine.device": "cpu"})
    built = build(cfg)
    try:
        assert built.optimizer.truncation == built.config.algo.truncation == 2
        assert to_dict(built.config) == to_dict(resolve(cfg))
    finally:
        built.evaluator.close()


def test_the_resolved_config_is_frozen_and_thaws_into_a_copy():
    from neuroevo.config import thaw
    from neuroevo.errors import StateError

    got = resolve(config(**{"algo.name": "ga", "env.id": "CartPole-v1"}))
    with pytest.raises(StateError, match="cannot set truncation: this config is resolved"):
        got.algo.truncation = 3
    with pytest.raises(StateError, match="cannot set seed"):
        override(got, "seed", 4)
    copy = thaw(got)
    copy.algo.truncation = 3
    assert (copy.algo.truncation, got.algo.truncation) == (3, 12)
    assert to_dict(resolve(copy))["algo"]["truncation"] == 3  # resolve takes a frozen or not


def test_the_paper_configs_play_one_training_episode_per_member():
    import pathlib

    from neuroevo.config import load

    root = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "configs"
    for name in ("deep_ga_atari", "random_search_atari"):
        assert resolve(load(str(root / f"{name}.yaml"))).algo.train_episodes == 1


@pytest.mark.parametrize("values, largest", [
    ({"algo.elite_candidates": 5, "algo.validation_episodes": 5}, 25),
    ({"algo.elite_candidates": 2, "algo.validation_episodes": 2, "algo.train_episodes": 4}, 24),
])
def test_the_engine_is_sized_for_the_largest_pass_it_will_evaluate(values, largest):
    """Deep GA's validation pass (5 candidates x 5 episodes), or a training pass of 4
    episodes a member, outnumbers a population of 6: the slots hold it in one wave, as they
    hold the population."""
    cfg = config(**{"algo.name": "ga", "algo.population": 6, "env.id": "CartPole-v1",
                    "engine.device": "cpu", "engine.workers": 1, "algo.test_episodes": 0,
                    **values})
    built = build(cfg)
    try:
        layout = built.evaluator.layout()
        assert layout["subsets"] * layout["slots"] == largest
    finally:
        built.evaluator.close()
