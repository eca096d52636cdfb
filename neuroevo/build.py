"""From a ``Config`` to the objects of a run: policy, optimizer and evaluator."""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch

from neuroevo.config import DEFAULT_GENERATIONS, Config, check
from neuroevo.engine.parallel import make_evaluator
from neuroevo.engine.pipeline import Evaluator, resolve_device
from neuroevo.envs.spec import EnvSpec, env_spec
from neuroevo.errors import CheckpointError, ConfigError, UnknownName
from neuroevo.kernels import from_environment
from neuroevo.noise import NoiseTable, default_size
from neuroevo.optim import OPTIMIZERS
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.nets import build_template
from neuroevo.policy.obsnorm import ObsNorm


@dataclass
class Built:
    policy: BatchedPolicy
    optimizer: object
    evaluator: Evaluator  # or a distributed evaluator with the same calls (neuroevo.dist)
    device: torch.device
    env: EnvSpec
    config: Config  # resolved: what config.yaml holds
    obs_norm: ObsNorm | None = None  # the run's shared observation normaliser
    arch: dict | None = None  # what rebuilds the network outside neuroevo (policy export)

    def restore(self, state: dict) -> None:
        """Load a checkpoint's optimizer and observation statistics."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self.obs_norm is not None:
            if state.get("obs_norm") is None:
                raise CheckpointError("the checkpoint has no observation statistics but the "
                                      "config asks for env.obs_norm; resume with its config")
            self.obs_norm.load_state_dict(state["obs_norm"])


def resolve(cfg: Config) -> Config:
    """A copy of ``cfg`` with every "auto / 0 / None means the default" of the algorithm, env,
    net and budget replaced by the value the run takes, so ``config.yaml`` says what ran
    (resolving twice changes nothing). The machine layout (``engine``) stays as given:
    automatic values are chosen again on the machine that runs it."""
    check(cfg)
    out, env = copy.deepcopy(cfg), env_spec(cfg.env)
    a = out.algo
    if a.name not in OPTIMIZERS:
        raise UnknownName("algorithm", a.name, OPTIMIZERS)
    if a.name in ("ga", "es") and a.sigma is None:
        a.sigma = inspect.signature(OPTIMIZERS[a.name]).parameters["sigma"].default
    if a.name == "ga" and not a.truncation:
        a.truncation = max(1, min(20, a.population // 5))
    if a.name != "es":
        a.elite_candidates = min(a.elite_candidates, a.population)
    if out.net.name == "auto":
        out.net.name = "small" if env.image else "mlp"
    if out.env.obs_norm == "auto":
        out.env.obs_norm = "on" if env.kind == "mujoco" else "off"
    if out.env.action_noise is None and env.kind != "atari":
        out.env.action_noise = 0.01 if env.kind == "mujoco" else 0.0
    if not (out.budget.generations or out.budget.frames):
        out.budget.generations = DEFAULT_GENERATIONS
    check(out)
    return out


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
        return OPTIMIZERS["es"](center=center, lr=a.lr, l2=a.l2,
                                center_episodes=a.validation_episodes, **common)
    extra = {"truncation": a.truncation} if a.name == "ga" else {}
    return OPTIMIZERS[a.name](spec.num_params, init_std=spec.init_std(),
                              elite_candidates=a.elite_candidates,
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


def build(cfg: Config, local: bool = True) -> Built:
    """The run's objects; ``local=False`` leaves ``evaluator`` None (no env pools here) for
    a distributed evaluator to take its place. ``Built.config`` is ``resolve(cfg)``."""
    cfg = resolve(cfg)
    device = resolve_device(cfg.engine.device)
    e, env, net = cfg.engine, env_spec(cfg.env), cfg.net.name
    if (net == "mlp") == env.image:
        raise ConfigError(f"net {net!r} does not fit observations of shape {env.obs_shape}; "
                          f"use {'--net small or large' if env.image else '--net mlp'}")
    hidden = _hidden(cfg.net.hidden) if net == "mlp" else ()
    template, spec = build_template(net, env.obs_shape, env.action.outputs, hidden or None)
    a = env.action
    arch = {"net": net, "obs_shape": list(env.obs_shape), "num_outputs": a.outputs,
            "hidden": list(hidden), "discrete": a.discrete,
            "action_low": None if a.discrete else list(a.low),
            "action_high": None if a.discrete else list(a.high)}
    policy = BatchedPolicy(template.to(device), spec, from_environment(device))
    optimizer = make_optimizer(cfg, policy)
    if cfg.env.obs_norm == "on" and env.image:
        raise ConfigError("env.obs_norm=on needs vector observations, not images; use "
                          "--set env.obs_norm=off")
    obs_norm = ObsNorm(env.obs_shape) if cfg.env.obs_norm == "on" else None
    evaluator = make_evaluator(
        policy, env, cfg.algo.population, device, workers=e.workers, subsets=e.subsets,
        slots=e.slots, env_threads=e.env_threads, seed=cfg.seed, obs_norm=obs_norm,
        obs_stats_fraction=cfg.env.obs_stats_fraction,
        action_noise=cfg.env.action_noise or 0.0,
    ) if local else None
    return Built(policy, optimizer, evaluator, device, env, cfg, obs_norm, arch)
