"""One typed config tree for a run: algorithm, env, network, engine, budget.

Defaults are quick CPU settings (``neuroevo run ga --game breakout`` shows progress in
seconds on a laptop); the paper-scale settings live in ``experiments/`` as overrides.
``override(cfg, "algo.truncation", "20")`` sets one key from text, with type checks and
suggestions for mistyped keys.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field

import yaml

from neuroevo.envs.ale_ids import is_ale_id
from neuroevo.envs.ale_ids import settings as ale_settings
from neuroevo.envs.locomotion import FEET, V5_TASKS
from neuroevo.errors import ConfigError, StateError, UnknownName
from neuroevo.files import read_regular
from neuroevo.optim import ALGORITHMS


class _Section:
    """A config section; the sections of a frozen config (``freeze``) refuse assignment."""

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen"):
            raise StateError(f"cannot set {name}: this config is resolved and frozen (it says "
                             "what the run is); change a copy from config.thaw")
        object.__setattr__(self, name, value)


@dataclass
class AlgoConfig(_Section):
    """The keys every algorithm has; ``algo_section`` adds every registered algorithm's own
    keys (``neuroevo.optim.ALGORITHMS``: each algorithm's ``Params`` documents them), None
    meaning the algorithm's default until ``build.resolve`` writes the value the run takes."""

    name: str = "ga"  # the algorithm: ga | es | rs | any name in neuroevo.optim.ALGORITHMS
    population: int = 64  # members per generation (paper GA: 1000)
    test_episodes: int = 30  # the papers' test score: episodes of the deployed network (the
    # elite or the centre) outside the budget (paper: 200; 0: no test phase)
    test_every: int = 10  # generations between test phases; the last generation is tested too

    def __reduce__(self):  # the section's class is made at run time: pickle its values
        return _algo_from_values, (dict(vars(self)),)


_SECTION: dict = {}


def algo_section() -> type:
    """``AlgoConfig`` with every registered algorithm's keys (rebuilt when one registers)."""
    if _SECTION.get("version") != ALGORITHMS.version:
        extra = [(key, hint | None, field(default=None))
                 for key, hint in ALGORITHMS.key_types().items()]
        _SECTION.update(version=ALGORITHMS.version, type=dataclasses.make_dataclass(
            "AlgoConfig", extra, bases=(AlgoConfig,), namespace={"__module__": __name__}))
    return _SECTION["type"]


def _algo_from_values(values: dict) -> AlgoConfig:
    frozen = values.pop("_frozen", False)
    section = algo_section()(**values)
    object.__setattr__(section, "_frozen", frozen)
    return section


def params_of(cfg: Config):
    """The chosen algorithm's ``Params`` from ``cfg.algo`` (None: the algorithm's default)."""
    return ALGORITHMS[cfg.algo.name].make_params(vars(cfg.algo))


@dataclass
class EnvConfig(_Section):
    game: str = "breakout"  # ale-py ROM id (snake_case)
    id: str = ""  # a gymnasium env id (CartPole-v1, ALE/Breakout-v5, ...); when set, it is
    # used instead of game; an ale-py id sets the Atari keys it means (neuroevo.envs.ale_ids)
    sticky_actions: float = 0.0  # repeat-action probability (0.25 for the v5 protocol)
    noop_max: int = 30  # random no-op frames on reset, after FIRE (neuroevo.envs.atari)
    frameskip: int = 4  # emulator frames per agent step
    full_action_space: bool = False  # Atari: all 18 actions, not the game's minimal set
    fire_reset: bool = True  # Atari: press FIRE at reset, before the no-ops (ale-py's reset)
    fire_on_life_loss: bool | None = None  # Atari: press FIRE on the step after a lost life
    # (None: on, the quick default; the paper configs: false; neuroevo.envs.atari)
    fire_on_frozen_screen: int | None = None  # Atari: press FIRE after this many agent steps
    # of an unchanged frame (None: 30, the quick default; 0: off, as the paper configs)
    episode_cap: int = 5000  # agent steps per training episode (paper: 5000)
    test_episode_cap: int = 0  # agent steps per test episode (0: the env's own limit, Atari:
    # 108,000 frames; resolved into the number in config.yaml)
    obs_norm: str = "auto"  # on | off | auto: running observation normalisation (auto: on
    # for the MuJoCo locomotion tasks, as OpenAI-ES does there; for every algorithm)
    obs_stats_fraction: float = 0.01  # training episodes whose observations update it (paper)
    action_noise: float | None = None  # action noise std in training episodes (None: 0.01
    # for the MuJoCo locomotion tasks, as OpenAI-ES; 0 otherwise)
    sim: str = "native"  # native | warp: MuJoCo C on CPU threads, or MuJoCo Warp with every
    # step on the device (the six v5 locomotion tasks; pip install -e '.[warp]')
    behaviour: str = "auto"  # auto | feet_contact | ram: the behaviour characterisation of
    # novelty search and MAP-Elites (auto: the env kind's own; feet_contact: MuJoCo, each
    # foot's share of the episode's steps in contact, QDax's descriptor; ram: Atari, the RAM
    # when the episode ends, what auto resolves to there)


@dataclass
class NetConfig(_Section):
    name: str = "auto"  # large (Nature DQN, 4M params) | small (1M) | mlp | auto
    hidden: str = "256,256"  # the MLP's hidden layer sizes
    vbn: bool = False  # virtual batch normalisation in the image nets (OpenAI-ES on Atari)


@dataclass
class EngineConfig(_Section):
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
    ray_timeout: float = 120.0  # seconds an actor may go without progress before it is
    # declared dead and replaced (its members run again elsewhere)


DEFAULT_GENERATIONS = 10  # the budget of a run given neither limit (CLI and neuroevo.train)


@dataclass
class BudgetConfig(_Section):
    generations: int = 0  # stop after this many generations (0: no limit)
    frames: int = 0  # stop after this many emulator frames (0: no limit; both 0:
    # DEFAULT_GENERATIONS generations)


@dataclass
class Config(_Section):
    seed: int = 0
    algo: AlgoConfig = field(default_factory=lambda: algo_section()())
    env: EnvConfig = field(default_factory=EnvConfig)
    net: NetConfig = field(default_factory=NetConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)


def _sections(cfg: Config) -> tuple:
    return (cfg, cfg.algo, cfg.env, cfg.net, cfg.engine, cfg.budget)


def freeze(cfg: Config) -> Config:
    """A copy of ``cfg`` that refuses every assignment (``build.resolve`` returns one)."""
    out = copy.deepcopy(cfg)
    for section in _sections(out):
        object.__setattr__(section, "_frozen", True)
    return out


def thaw(cfg: Config) -> Config:
    """A copy of ``cfg`` that can be changed."""
    out = copy.deepcopy(cfg)
    for section in _sections(out):
        object.__setattr__(section, "_frozen", False)
    return out


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


def _types(hint) -> list[type]:
    """The types a field's hint allows, ``None`` aside (``float | None``: ``[float]``)."""
    args = typing.get_args(hint)
    return [a for a in args if a is not type(None)] if args else [hint]


def locate(cfg: Config, key: str) -> tuple[object, str]:
    """The section of ``cfg`` that holds dotted ``key``, and the field's name in it."""
    *path, name = key.split(".")
    for part in path:
        cfg = getattr(cfg, part)
    return cfg, name


def value_of(cfg: Config, key: str):
    """The value of dotted ``key`` in ``cfg``."""
    section, name = locate(cfg, key)
    return getattr(section, name)


def field_types(key: str) -> list[type]:
    """The types dotted ``key`` holds, ``None`` aside (``algo.sigma``: ``[float]``)."""
    section, name = locate(Config(), key)
    return _types(typing.get_type_hints(type(section))[name])


def _coerce(key: str, text, hint):
    """Parse ``text`` as the field's type (``int``, ``float``, ``str``, ``bool``, ``X | None``).

    A YAML boolean is never a number or a name (``population: yes`` is an error, not 1), and
    floats must be finite.
    """
    args = typing.get_args(hint)
    types = _types(hint)
    if args and (text is None or str(text).lower() == "none"):
        return None
    if types == [bool]:
        if isinstance(text, bool) or str(text).lower() in ("true", "false"):
            return text if isinstance(text, bool) else str(text).lower() == "true"
        raise ConfigError(f"{key} must be true or false, got {text!r}")
    names = " or ".join(t.__name__ for t in types)
    if isinstance(text, bool):
        raise ConfigError(f"{key} must be {names}, got the boolean {text!r}; write a "
                          f"{names} (quote it in YAML)")
    for t in types:
        try:
            if t is int and isinstance(text, float) and not text.is_integer():
                continue
            value = t(text)
        except (TypeError, ValueError):
            continue
        if t is float and not math.isfinite(value):
            raise ConfigError(f"{key} must be a finite number, got {text!r}")
        return value
    raise ConfigError(f"{key} must be {names}, got {text!r}")


def override(cfg: Config, key: str, value) -> None:
    """Set dotted ``key`` to ``value`` (text or a Python value), type-checked."""
    if key not in keys():
        raise UnknownName("config key", key, keys())
    target, name = locate(cfg, key)
    hints = typing.get_type_hints(type(target))
    setattr(target, name, _coerce(key, value, hints[name]))


def apply_sets(cfg: Config, items) -> None:
    """Apply ``--set`` items, each ``key=value`` text (``override`` checks the key and type)."""
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set takes key=value, got {item!r}")
        override(cfg, *item.split("=", 1))


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


TEST_KEYS = ("algo.test_episodes", "algo.test_every", "env.test_episode_cap")


def identity(cfg: Config) -> dict:
    """What defines a run, as flat keys: the seed, algorithm, env and net. A resume may change
    the budget, the test schedule (``TEST_KEYS``: tests change no state) and the machine
    layout (engine), never these."""
    flat = {}
    for key in keys(cfg):
        if key.split(".")[0] in ("seed", "algo", "env", "net") and key not in TEST_KEYS:
            flat[key] = value_of(cfg, key)
    return flat


class _Loader(yaml.SafeLoader):
    """``yaml.safe_load`` with YAML 1.2 booleans: only true/false, so ``obs_norm: on`` stays
    the name ``on`` and ``population: yes`` is an error instead of 1."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                              re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def parse_yaml(text):
    """Safe YAML (no tags that build objects) with YAML 1.2 booleans; nesting too deep to
    parse is a ``yaml.YAMLError`` like any other unreadable document."""
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read") from None


def load(path: str) -> Config:
    """A config from a YAML file of overrides (see ``experiments/configs/``)."""
    try:
        data = parse_yaml(read_regular(path).decode()) or {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}; check the path") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid YAML ({str(e).splitlines()[0]})"
                          ) from None
    return from_dict(data)


# unused by gymnasium ids
ATARI_KEYS = {"game", "sticky_actions", "noop_max", "frameskip", "full_action_space",
              "fire_reset", "fire_on_life_loss", "fire_on_frozen_screen"}
RAY_KEYS = {"ray_address", "ray_actors", "ray_timeout"}  # used only with engine.backend=ray
RAY_ADDRESS = re.compile(r"^(|auto|(ray://)?[^\s:/]+:\d{1,5})$")
DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
NETS = ("auto", "large", "small", "mlp")


def _ranges(cfg: Config) -> list[tuple[str, object, bool, str]]:
    a, e, g, b = cfg.algo, cfg.env, cfg.engine, cfg.budget
    return [
        ("seed", cfg.seed, cfg.seed >= 0, ">= 0"),
        ("algo.population", a.population, a.population >= 1, ">= 1"),
        ("algo.test_episodes", a.test_episodes, a.test_episodes >= 0, ">= 0 (0: no test phase)"),
        ("algo.test_every", a.test_every, a.test_every >= 1, ">= 1 (generations)"),
        ("env.sticky_actions", e.sticky_actions, 0 <= e.sticky_actions <= 1, "in [0, 1]"),
        ("env.noop_max", e.noop_max, e.noop_max >= 0, ">= 0"),
        ("env.frameskip", e.frameskip, e.frameskip >= 1, ">= 1"),
        ("env.fire_on_frozen_screen", e.fire_on_frozen_screen,
         e.fire_on_frozen_screen is None or e.fire_on_frozen_screen >= 0,
         ">= 0 agent steps (0: off; or none: the quick default, 30)"),
        ("env.episode_cap", e.episode_cap, e.episode_cap >= 0,
         ">= 0 (0: no cap, the env's own episode limit)"),
        ("env.test_episode_cap", e.test_episode_cap, e.test_episode_cap >= 0,
         ">= 0 (0: the env's own episode limit)"),
        ("env.obs_norm", e.obs_norm, e.obs_norm in ("on", "off", "auto"), "on, off or auto"),
        ("env.obs_stats_fraction", e.obs_stats_fraction, 0 <= e.obs_stats_fraction <= 1,
         "in [0, 1]"),
        ("env.action_noise", e.action_noise, e.action_noise is None or e.action_noise >= 0,
         ">= 0 (or none: the env's default)"),
        ("env.sim", e.sim, e.sim in ("native", "warp"), "native or warp"),
        ("env.behaviour", e.behaviour, e.behaviour in ("auto", "feet_contact", "ram"),
         "auto, feet_contact or ram"),
        ("engine.device", g.device, bool(DEVICE.match(g.device)), "auto, cpu, cuda or cuda:N"),
        ("engine.subsets", g.subsets, g.subsets >= 0, ">= 0 (0: automatic)"),
        ("engine.slots", g.slots, g.slots >= 0, ">= 0 (0: automatic)"),
        ("engine.env_threads", g.env_threads, g.env_threads >= 0, ">= 0 (0: automatic)"),
        ("engine.workers", g.workers, g.workers >= 0, ">= 0 (0: automatic)"),
        ("engine.backend", g.backend, g.backend in ("local", "ray"), "local or ray"),
        ("engine.ray_actors", g.ray_actors, g.ray_actors >= 0, ">= 0 (0: one per node)"),
        ("engine.ray_address", g.ray_address, bool(RAY_ADDRESS.match(g.ray_address)),
         "auto, HOST:PORT or ray://HOST:PORT (empty: a Ray instance on this machine)"),
        ("engine.ray_timeout", g.ray_timeout, g.ray_timeout > 0, "> 0 seconds"),
        ("budget.generations", b.generations, b.generations >= 0, ">= 0 (0: no limit)"),
        ("budget.frames", b.frames, b.frames >= 0, ">= 0 (0: no limit)"),
    ]


def unused(cfg: Config) -> list[tuple[str, str]]:
    """``(key, why)`` for every key set away from its default that this run would ignore."""
    d, out, mine = Config(), [], ALGORITHMS[cfg.algo.name].config_keys()
    for key in ALGORITHMS.key_types():
        if key not in mine and getattr(cfg.algo, key, None) is not None:
            users = ALGORITHMS.users(key)
            out.append((f"algo.{key}", f"the {cfg.algo.name} algorithm does not use it ("
                        f"{', '.join(users)} use{'s' if len(users) == 1 else ''} it)"))
    if cfg.env.id and not is_ale_id(cfg.env.id):
        out += [(f"env.{k}", f"it configures Atari games, and env.id={cfg.env.id!r} is set")
                for k in sorted(ATARI_KEYS) if getattr(cfg.env, k) != getattr(d.env, k)]
    elif cfg.env.action_noise not in (None, 0):
        out.append(("env.action_noise", "Atari actions are discrete"))
    if cfg.net.name in ("large", "small") and cfg.net.hidden != d.net.hidden:
        out.append(("net.hidden", f"it sizes the mlp net, and net.name={cfg.net.name!r}"))
    if cfg.net.vbn and cfg.net.name == "mlp":
        out.append(("net.vbn", "virtual batch normalisation is for the image nets (small, "
                               "large), and net.name='mlp'"))
    if cfg.env.behaviour != d.env.behaviour and not ALGORITHMS[cfg.algo.name].optimizer \
            .uses_behaviour:
        out.append(("env.behaviour", f"the {cfg.algo.name} algorithm reads no behaviour ("
                    f"{', '.join(n for n in ALGORITHMS if ALGORITHMS[n].optimizer.uses_behaviour)} "
                    "do)"))
    if cfg.engine.backend != "ray":
        out += [(f"engine.{k}", "it is used only with --backend ray") for k in sorted(RAY_KEYS)
                if getattr(cfg.engine, k) != getattr(d.engine, k)]
    return out


def check(cfg: Config) -> None:
    """Every value in its range, and no key set that the run would silently ignore."""
    if cfg.net.name not in NETS:
        raise UnknownName("network", cfg.net.name, NETS)
    for key, value, ok, allowed in _ranges(cfg):
        if not ok:
            raise ConfigError(f"{key} must be {allowed}, got {value!r}")
    ALGORITHMS[cfg.algo.name].check(params_of(cfg))
    for key, why in unused(cfg):
        raise ConfigError(f"{key} is set but not used: {why}; remove it from the config or "
                          "the command line")
    if cfg.env.id and is_ale_id(cfg.env.id):
        _check_ale_id(cfg.env)
    if cfg.env.behaviour == "ram" and cfg.env.id and not is_ale_id(cfg.env.id):
        raise ConfigError(f"env.behaviour=ram reads the RAM of Atari games, not "
                          f"env.id={cfg.env.id!r}; use env.behaviour=auto")
    if cfg.env.sim == "warp":
        _check_warp(cfg)
    if cfg.env.behaviour == "feet_contact" and cfg.env.id not in FEET:
        what = f"env.id={cfg.env.id!r}" if cfg.env.id else f"the Atari game {cfg.env.game!r}"
        raise ConfigError(f"env.behaviour=feet_contact measures the feet of the MuJoCo tasks "
                          f"({', '.join(FEET)}), not {what}; use env.behaviour=auto")


def _check_warp(cfg: Config) -> None:
    """``env.sim=warp`` runs the six v5 locomotion tasks in this process."""
    env = cfg.env
    if env.id not in V5_TASKS:
        what = (f"env.id={env.id!r}" if env.id else
                f"the Atari game {env.game!r} (env.game)")
        raise ConfigError(f"--sim warp runs the MuJoCo v5 locomotion tasks "
                          f"({', '.join(V5_TASKS)}), not {what}; use --sim native")
    if cfg.engine.backend != "local":
        raise ConfigError("--sim warp runs in this process: use --backend local")
    if env.behaviour != "auto":
        raise ConfigError("env.behaviour=feet_contact runs on --sim native (Warp's contacts "
                          "are not read yet); remove it or use --sim native")
    for key in ("subsets", "env_threads", "workers"):
        if getattr(cfg.engine, key):
            raise ConfigError(f"engine.{key} is set but not used: --sim warp runs one driver "
                              "over engine.slots worlds; remove it")


def _check_ale_id(env: EnvConfig) -> None:
    """An ale-py id means its Atari keys: one set away from its default to another value
    is refused rather than silently overridden (or silently ignored)."""
    default, means = EnvConfig(), ale_settings(env.id)
    for key, meant in means.items():
        value = getattr(env, key)
        if value != getattr(default, key) and value != meant:
            raise ConfigError(f"env.{key}={value!r} conflicts with env.id={env.id!r}, which "
                              f"means {meant!r}; remove it, or use --game {means['game']} "
                              "with your settings")
