"""One typed config tree for a run: algorithm, env, network, engine, budget.

Defaults are quick CPU settings (``neuroevo run ga --game breakout`` shows progress in
seconds on a laptop); the paper-scale settings live in ``experiments/`` as overrides.
``override(cfg, "algo.truncation", "20")`` sets one key from text, with type checks and
suggestions for mistyped keys.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from neuroevo.errors import ConfigError, UnknownName


@dataclass
class AlgoConfig:
    name: str = "ga"  # ga | es | rs
    population: int = 64  # members per generation (paper GA: 1000)
    sigma: float | None = None  # mutation / perturbation std (None: the algorithm's default)
    truncation: int = 0  # GA parents (0: population // 5, at most 20; paper: 20)
    elite_candidates: int = 5  # GA/RS members re-evaluated for the elite (paper: 10)
    validation_episodes: int = 5  # episodes per GA/RS elite candidate (paper: 30); ES: centre
    # episodes per generation, for logging only
    lr: float = 0.01  # ES Adam step size
    l2: float = 0.005  # ES L2 coefficient


@dataclass
class EnvConfig:
    game: str = "breakout"  # ale-py ROM id (snake_case)
    id: str = ""  # a gymnasium env id (CartPole-v1, ...); when set, it is used instead of game
    sticky_actions: float = 0.0  # repeat-action probability (0.25 for the v5 protocol)
    noop_max: int = 30  # random no-ops on reset
    frameskip: int = 4  # emulator frames per agent step
    episode_cap: int = 5000  # agent steps per training episode (paper: 5000)
    obs_norm: str = "auto"  # on | off | auto: running observation normalisation (auto: on
    # for the MuJoCo locomotion tasks, as OpenAI-ES does there; for every algorithm)
    obs_stats_fraction: float = 0.01  # training episodes whose observations update it (paper)
    action_noise: float | None = None  # action noise std in training episodes (None: 0.01
    # for the MuJoCo locomotion tasks, as OpenAI-ES; 0 otherwise)


@dataclass
class NetConfig:
    name: str = "auto"  # large (Nature DQN, 4M params) | small (1M) | mlp | auto
    hidden: str = "256,256"  # the MLP's hidden layer sizes


@dataclass
class EngineConfig:
    device: str = "auto"  # auto | cpu | cuda[:N]
    subsets: int = 0  # double-buffered subsets (0: automatic)
    slots: int = 0  # slots per subset (0: automatic)
    env_threads: int = 0  # simulator threads per subset (0: ale-py's choice; MuJoCo: 1/core;
    # 1 with several workers)
    workers: int = 0  # driver threads, each with its own subsets (0: 1 on a GPU, 1 per core
    # on a CPU, at least 8 members each)
    backend: str = "local"  # local | ray (episodes in Ray actors, seed-only messages)
    ray_address: str = ""  # Ray cluster: auto | HOST:PORT (empty: start one on this machine)
    ray_actors: int = 0  # Ray actors, each with a pipelined evaluator (0: one per node)


@dataclass
class BudgetConfig:
    generations: int = 0  # stop after this many generations (0: no limit)
    frames: int = 0  # stop after this many emulator frames (0: no limit)


@dataclass
class Config:
    seed: int = 0
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    net: NetConfig = field(default_factory=NetConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)


def keys(cfg=None, prefix: str = "") -> list[str]:
    """Every settable dotted key (``algo.truncation``, ``seed``, ...)."""
    cfg = cfg or Config()
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += keys(value, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def _coerce(key: str, text, hint):
    """Parse ``text`` as the field's type (``int``, ``float``, ``str``, ``X | None``)."""
    args = typing.get_args(hint)
    types = [a for a in args if a is not type(None)] if args else [hint]
    if args and (text is None or str(text).lower() == "none"):
        return None
    for t in types:
        try:
            if t is bool:
                if str(text).lower() in ("true", "1", "yes", "false", "0", "no"):
                    return str(text).lower() in ("true", "1", "yes")
                continue
            if t is int and isinstance(text, float) and not text.is_integer():
                continue
            return t(text)
        except (TypeError, ValueError):
            continue
    names = " or ".join(t.__name__ for t in types)
    raise ConfigError(f"{key} must be {names}, got {text!r}")


def override(cfg: Config, key: str, value) -> None:
    """Set dotted ``key`` to ``value`` (text or a Python value), type-checked."""
    if key not in keys():
        raise UnknownName("config key", key, keys())
    *path, name = key.split(".")
    target = cfg
    for part in path:
        target = getattr(target, part)
    hints = typing.get_type_hints(type(target))
    setattr(target, name, _coerce(key, value, hints[name]))


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(data: dict) -> Config:
    """A config from a nested dict (a YAML file); unknown keys are errors with suggestions."""
    cfg = Config()

    def walk(d, prefix=""):
        if not isinstance(d, dict):
            raise ConfigError(f"config section {prefix.rstrip('.') or 'top'} must be a mapping")
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                override(cfg, f"{prefix}{k}", v)

    walk(data)
    return cfg


def load(path: str) -> Config:
    """A config from a YAML file of overrides (see ``experiments/configs/``)."""
    import yaml

    try:
        with open(path) as f:
            data = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}; check the path") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML ({str(e).splitlines()[0]})"
                          ) from None
    return from_dict(data)
