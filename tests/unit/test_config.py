import pytest

from neuroevo.config import Config, from_dict, keys, override, to_dict
from neuroevo.errors import ConfigError, UnknownName


def test_override_parses_text_by_field_type():
    cfg = Config()
    override(cfg, "algo.population", "128")
    override(cfg, "algo.sigma", "0.01")
    override(cfg, "env.game", "frostbite")
    override(cfg, "seed", 7)
    assert (cfg.algo.population, cfg.algo.sigma, cfg.env.game, cfg.seed) == (128, 0.01, "frostbite", 7)
    override(cfg, "algo.sigma", "none")
    assert cfg.algo.sigma is None


def test_mistyped_keys_and_values_are_clear_errors():
    with pytest.raises(UnknownName, match=r"unknown config key 'algo.truncaton'; did you mean 'algo.truncation'"):
        override(Config(), "algo.truncaton", "3")
    with pytest.raises(ConfigError, match=r"algo.population must be int, got 'many'"):
        override(Config(), "algo.population", "many")
    with pytest.raises(ConfigError, match=r"algo.population must be int, got 2.5"):
        override(Config(), "algo.population", 2.5)


def test_dict_round_trip():
    cfg = Config()
    override(cfg, "net.name", "large")
    assert from_dict(to_dict(cfg)) == cfg
    assert "engine.device" in keys() and "budget.frames" in keys()
    with pytest.raises(UnknownName, match=r"unknown config key 'env\.gam'"):
        from_dict({"env": {"gam": "pong"}})
