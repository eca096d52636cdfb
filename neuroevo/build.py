"""From a ``Config`` to the objects of a run: policy, optimizer and evaluator."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neuroevo.config import Config
from neuroevo.engine.pipeline import Evaluator, default_layout, resolve_device
from neuroevo.envs.atari import AtariConfig, AtariPool
from neuroevo.envs.gym import GymPool, check_env_id
from neuroevo.errors import ConfigError, UnknownName
from neuroevo.noise import NoiseTable, default_size
from neuroevo.optim import OPTIMIZERS
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.nets import build_template


@dataclass
class Built:
    policy: BatchedPolicy
    optimizer: object
    evaluator: Evaluator
    device: torch.device
    atari: AtariConfig | None  # None for a gymnasium env
    make_pool: object  # num_envs -> a pool of this run's env


def atari_config(cfg: Config) -> AtariConfig:
    e = cfg.env
    return AtariConfig(e.game, sticky_actions=e.sticky_actions, noop_max=e.noop_max,
                       frameskip=e.frameskip, episode_cap=e.episode_cap or None)


def make_optimizer(cfg: Config, policy: BatchedPolicy):
    a = cfg.algo
    if a.name not in OPTIMIZERS:
        raise UnknownName("algorithm", a.name, OPTIMIZERS)
    spec = policy.spec
    common = dict(population_size=a.population, seed=cfg.seed)
    if a.sigma is not None:
        common["sigma"] = a.sigma
    if a.name == "es":
        # ES starts from one random network of the policy's initialisation.
        noise = NoiseTable.shared(size=default_size(spec.num_params))  # the optimizer's default
        center = noise.slice(cfg.seed, spec.num_params) * spec.init_std()
        return OPTIMIZERS["es"](center=center, lr=a.lr, l2=a.l2, **common)
    truncation = a.truncation or max(1, min(20, a.population // 5))
    extra = {"truncation": truncation} if a.name == "ga" else {}
    return OPTIMIZERS[a.name](spec.num_params, init_std=spec.init_std(),
                              elite_candidates=min(a.elite_candidates, a.population),
                              validation_episodes=a.validation_episodes, **extra, **common)


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(h) for h in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ConfigError(f"net.hidden must be comma-separated positive sizes like 256,256, "
                          f"got {text!r}")
    return sizes


def build(cfg: Config) -> Built:
    device = resolve_device(cfg.engine.device)
    e = cfg.engine
    if cfg.env.id:
        atari, frameskip, cap = None, 1, cfg.env.episode_cap or None
        check_env_id(cfg.env.id)

        def make_pool(n):
            return GymPool(cfg.env.id, n)
    else:
        atari = atari_config(cfg)
        frameskip, cap = atari.frameskip, atari.episode_cap

        def make_pool(n):
            return AtariPool(atari, n, e.env_threads)
    probe = make_pool(1)
    obs_shape, num_actions = probe.obs_shape, probe.num_actions
    probe.close()
    net = cfg.net.name
    if net == "auto":
        net = "small" if len(obs_shape) == 3 else "mlp"
    if (net == "mlp") != (len(obs_shape) != 3):
        raise ConfigError(f"net {net!r} does not fit observations of shape {obs_shape}; use "
                          f"{'--net mlp' if len(obs_shape) != 3 else '--net small or large'}")
    template, spec = build_template(net, obs_shape, num_actions, _hidden(cfg.net.hidden))
    policy = BatchedPolicy(template.to(device), spec)
    optimizer = make_optimizer(cfg, policy)
    subsets, slots = default_layout(cfg.algo.population, device)
    evaluator = Evaluator(policy, make_pool, subsets=e.subsets or subsets,
                          slots=e.slots or slots, episode_cap=cap, frameskip=frameskip,
                          device=device, seed=cfg.seed)
    return Built(policy, optimizer, evaluator, device, atari, make_pool)


def train(cfg: Config | None = None, *, on_generation=None, on_episode=None, **overrides):
    """Build a run from ``cfg`` (plus dotted ``overrides`` such as ``algo__population=32``)
    and train until the budget is spent (one generation without one); returns a
    ``RunResult``. Example: ``train(algo__name="ga", env__game="pong", budget__generations=3)``.
    """
    from neuroevo.config import override
    from neuroevo.loop import Budget, RunResult, generations

    cfg = cfg or Config()
    for key, value in overrides.items():
        override(cfg, key.replace("__", "."), value)
    built = build(cfg)
    budget = Budget(cfg.budget.generations or None, cfg.budget.frames or None)
    if budget.generations is None and budget.frames is None:
        budget.generations = 1
    result = RunResult(optimizer=built.optimizer, policy=built.policy)
    try:
        for row in generations(built.optimizer, built.evaluator, budget, on_episode=on_episode):
            result.history.append(row)
            if on_generation is not None:
                on_generation(row)
    finally:
        built.evaluator.close()
    return result
