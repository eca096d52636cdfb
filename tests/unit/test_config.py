import pytest

from neuroevo.config import Config, check, from_dict, keys, override, to_dict
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


def test_shipped_experiment_configs_load():
    import pathlib

    from neuroevo.config import load
    files = sorted((pathlib.Path(__file__).parents[2] / "experiments" / "configs").glob("*.yaml"))
    assert len(files) >= 4
    for f in files:
        cfg = load(str(f))
        check(cfg)  # a registered algorithm, every key in range and used by it
    paper = load(str(files[0].parent / "deep_ga_atari.yaml"))
    assert (paper.algo.population, paper.algo.truncation, paper.algo.sigma) == (1000, 20, 0.002)
    assert (paper.algo.elite_candidates, paper.algo.validation_episodes) == (10, 30)
    assert (paper.net.name, paper.env.episode_cap, paper.budget.frames) == ("large", 5000, 10**9)


def test_bad_config_files(tmp_path):
    from neuroevo.config import load
    bad_key = tmp_path / "a.yaml"
    bad_key.write_text("algo:\n  populaton: 3\n")
    with pytest.raises(UnknownName, match=r"did you mean 'algo\.population'"):
        load(str(bad_key))
    bad_yaml = tmp_path / "b.yaml"
    bad_yaml.write_text("algo: [unclosed\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML"):
        load(str(bad_yaml))
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing.yaml"):
        load(str(tmp_path / "missing.yaml"))
