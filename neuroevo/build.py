"""From a ``Config`` to the objects of a run: policy, optimizer and evaluator."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

import neuroevo
from neuroevo.config import (
    DEFAULT_GENERATIONS,
    Config,
    check,
    freeze,
    from_dict,
    params_of,
    thaw,
    to_dict,
)
from neuroevo.engine.behaviour import Behaviour, built_in, of_final_observation
from neuroevo.engine.parallel import default_workers, make_evaluator
from neuroevo.engine.pipeline import default_layout, resolve_device
from neuroevo.engine.warp import WarpEvaluator, warp_worlds
from neuroevo.envs.base import random_play
from neuroevo.envs.spec import EnvSpec, env_spec
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.evaluation import Evaluator
from neuroevo.genomes import SEED_BOUND
from neuroevo.kernels import from_environment
from neuroevo.noise import NoiseTable, default_size
from neuroevo.optim import ALGORITHMS, Start
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.nets import build_template, normc
from neuroevo.policy.obsnorm import ObsNorm
from neuroevo.policy.spec import ParamSpec
from neuroevo.policy.vbn import REFERENCE_SIZE


@dataclass
class Built:
    policy: BatchedPolicy
    optimizer: object
    evaluator: Evaluator  # local, several drivers, or Ray (neuroevo.dist)
    device: torch.device
    env: EnvSpec
    config: Config  # resolved and frozen: what config.yaml holds
    obs_norm: ObsNorm | None = None  # the run's shared observation normaliser
    arch: dict | None = None  # what rebuilds the network outside neuroevo (policy export)

    def layout(self) -> dict:
        """The machine layout this run's evaluator runs (``RunDir.record_layout``)."""
        return {**self.evaluator.layout(), "neuroevo": neuroevo.__version__}

    def restore(self, state: dict) -> None:
        """Load a checkpoint's optimizer and observation statistics."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self.obs_norm is not None:
            if state.get("obs_norm") is None:
                raise CheckpointError("the checkpoint has no observation statistics but the "
                                      "config asks for env.obs_norm; resume with its config")
            self.obs_norm.load_state_dict(state["obs_norm"])
        if self.policy.vbn:
            saved = state.get("vbn_reference")
            if saved is None or not torch.equal(saved, self.policy.reference_batch.cpu()):
                raise CheckpointError(
                    "the checkpoint's VBN reference batch differs from the one this machine "
                    "collects from the run seed (another ale-py?); resume where the run began")


def resolve(cfg: Config) -> Config:
    """A frozen copy of ``cfg`` with every "auto / 0 / None means the default" of the
    algorithm, env, net and budget replaced by the value the run takes, so ``config.yaml``
    says what ran (resolving twice changes nothing). The machine layout (``engine``) stays
    as given: automatic values are chosen again on the machine that runs it."""
    check(cfg)
    out, env = thaw(cfg), env_spec(cfg.env)
    params = params_of(out).resolved(out.algo.population, env.traits.train_episodes)
    for key in ALGORITHMS[out.algo.name].config_keys():
        setattr(out.algo, key, getattr(params, key))
    if out.net.name == "auto":
        out.net.name = "small" if env.image else "mlp"
    if out.env.obs_norm == "auto":
        out.env.obs_norm = "on" if env.traits.obs_norm else "off"
    if out.env.action_noise is None:
        out.env.action_noise = env.traits.action_noise
    if out.env.behaviour == "auto" and ALGORITHMS[out.algo.name].optimizer.uses_behaviour:
        out.env.behaviour = env.traits.measures
    if env.atari is not None:  # what an ale-py id means is written out (envs.ale_ids)
        for key in ("game", "sticky_actions", "frameskip", "full_action_space", "noop_max",
                    "fire_reset", "fire_on_life_loss", "fire_on_frozen_screen"):
            setattr(out.env, key, getattr(env.atari, key))
    if not out.env.test_episode_cap:  # the env's own limit, as the papers test
        out.env.test_episode_cap = env.max_steps or 108_000 // env.frameskip
    if not (out.budget.generations or out.budget.frames):
        out.budget.generations = DEFAULT_GENERATIONS
    check(out)
    return freeze(out)


def initial_center(cfg: Config, spec: ParamSpec, index: int = 0) -> torch.Tensor:
    """One random network from the run's seed, the centre a distribution starts at: on vector
    observations (MLP) OpenAI's MuJoCo initialisation, normc(1.0) hidden and normc(0.01)
    output; else the policy's own initialisation. ``index`` > 0 draws another (the other
    centres of a meta-population, NS-ES)."""
    noise = NoiseTable.shared(size=default_size(spec.num_params))  # the optimizers' default
    seed = cfg.seed if index == 0 else int(np.random.default_rng([cfg.seed, index]).integers(
        0, SEED_BOUND))
    raw = noise.slice(seed, spec.num_params)
    return normc(spec, raw) if cfg.net.name == "mlp" else raw * spec.init_std()


def make_optimizer(cfg: Config, spec: ParamSpec, env: EnvSpec, behaviour=None):
    """The optimizer of a resolved ``cfg``: its algorithm's ``from_config``, told the
    dimensions of the env kind's behaviour characterisation (refused if its archive cannot
    hold them: a 3-d grid for the maze's 2-d positions), unless ``behaviour`` (a user's
    function) measures another."""
    start = Start(spec.num_params, cfg.algo.population, cfg.seed, spec.init_std(),
                  tuple(e.shape for e in spec),
                  lambda index=0: initial_center(cfg, spec, index))
    optimizer = ALGORITHMS[cfg.algo.name].from_config(params_of(cfg), start)
    if optimizer.uses_behaviour and behaviour is None:
        optimizer.expect_behaviour(env.behaviour_dims)
    return optimizer


def optimizer_of(cfg: Config):
    """The optimizer a run of ``cfg`` starts from, with no policy on a device and no
    evaluator: what reading a checkpoint's state needs (``neuroevo plot --archive``)."""
    cfg, env = resolve(cfg), env_spec(cfg.env)
    with torch.random.fork_rng(devices=[]):  # the template's init draws: not the run's
        spec = _template(cfg, env)[1]
    return make_optimizer(cfg, spec, env)


def logging_episodes(cfg: Config) -> int:
    """The most episodes that join a generation's pass besides its population
    (``loop.logging_jobs``): the centre's episodes and the test phase's, in a resolved ``cfg``."""
    return params_of(cfg).logging_episodes() + cfg.algo.test_episodes


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(h) for h in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ConfigError(f"net.hidden must be comma-separated positive sizes like 256,256, "
                          f"got {text!r}")
    return sizes


def reference_batch(env: EnvSpec, seed: int, device) -> torch.Tensor:
    """VBN's reference batch: ``REFERENCE_SIZE`` frames of random play seeded by ``seed``."""
    pool = env.make_pool(1, 1)
    try:
        frames = random_play(pool, env.action.n, seed, REFERENCE_SIZE)
    finally:
        pool.close()
    return torch.from_numpy(frames).to(device)


def _template(cfg: Config, env: EnvSpec):
    """``(template network, its ParamSpec, hidden sizes)`` of a resolved ``cfg``."""
    net = cfg.net.name
    if (net == "mlp") == env.image:
        raise ConfigError(f"net {net!r} does not fit observations of shape {env.obs_shape}; "
                          f"use {'--net small or large' if env.image else '--net mlp'}")
    hidden = _hidden(cfg.net.hidden) if net == "mlp" else ()
    template, spec = build_template(net, env.obs_shape, env.action.outputs, hidden or None,
                                    vbn=cfg.net.vbn)
    return template, spec, hidden


def behaviour_of(cfg: Config, env: EnvSpec, fn=None) -> Behaviour | None:
    """What the evaluator measures of each episode for ``cfg``'s algorithm: ``fn`` (a user's
    function of the final observation) if given, else the env kind's own BC when the
    algorithm reads BCs (``Optimizer.uses_behaviour``), else nothing."""
    if fn is not None:
        return of_final_observation(fn)
    if not ALGORITHMS[cfg.algo.name].optimizer.uses_behaviour:
        return None
    if env.traits.behaviour is None:
        raise ConfigError(f"{cfg.algo.name} needs a behaviour characterisation and {env.name} "
                          "has none built in; give one: neuroevo.train(..., behaviour=fn), fn "
                          "mapping an episode's final observation to a vector")
    return built_in


def build(cfg: Config, local: bool = True, behaviour=None) -> Built:
    """The run's objects; ``local=False`` leaves ``evaluator`` None (no env pools here) for
    a distributed evaluator to take its place. ``Built.config`` is ``resolve(cfg)``.
    ``behaviour``: a function of an episode's final observation giving its behaviour
    characterisation (``neuroevo.engine.behaviour``; default: the env kind's own)."""
    cfg = resolve(cfg)
    device = resolve_device(cfg.engine.device)
    e, env, net = cfg.engine, env_spec(cfg.env), cfg.net.name
    template, spec, hidden = _template(cfg, env)
    arch = {"net": net, "obs_shape": list(env.obs_shape), "hidden": list(hidden),
            **env.action.arch(), "vbn": cfg.net.vbn}
    optimizer = make_optimizer(cfg, spec, env, behaviour)
    policy = BatchedPolicy(template.to(device), spec, from_environment(device),
                           reference_batch(env, cfg.seed, device) if cfg.net.vbn else None,
                           optimizer.lowrank)  # slots for the optimizer's perturbations
    if cfg.env.obs_norm == "on" and env.image:
        raise ConfigError("env.obs_norm=on needs vector observations, not images; use "
                          "--set env.obs_norm=off")
    obs_norm = ObsNorm(env.obs_shape) if cfg.env.obs_norm == "on" else None
    largest = params_of(cfg).largest_pass(cfg.algo.population)  # GA: its validation pass
    options = dict(seed=cfg.seed, obs_norm=obs_norm,
                   obs_stats_fraction=cfg.env.obs_stats_fraction,
                   action_noise=cfg.env.action_noise or 0.0,
                   behaviour=behaviour_of(cfg, env, behaviour))
    if not local:
        evaluator = None
    elif cfg.env.sim == "warp":
        worlds = e.slots or warp_worlds(largest + logging_episodes(cfg))
        WarpEvaluator.check_fits(env.name, worlds, spec.num_params, device)
        evaluator = WarpEvaluator(policy, env, worlds=worlds, device=device, **options)
    else:
        evaluator = make_evaluator(
            policy, env, largest, device, workers=e.workers, subsets=e.subsets, slots=e.slots,
            env_threads=e.env_threads, carried=logging_episodes(cfg), **options)
    return Built(policy, optimizer, evaluator, device, env, cfg, obs_norm, arch)


def fit_to_cpus(cfg: Config, cpus: int, members: int = 0) -> Config:
    """``cfg`` with the engine layout it leaves automatic fitted to ``cpus``, a Ray worker's
    or a sweep trial's share, not the node's cores: the driver threads that
    ``make_evaluator`` gives a machine of ``cpus`` cores for ``members`` (0: the population)
    and this net (``default_workers``: one for a small MuJoCo net), and one simulator thread
    per pool when there are several drivers (else ``cpus``: a pool's own default would take
    every core of the node)."""
    e = cfg.engine
    if not e.workers:
        run, env = resolve(cfg), env_spec(cfg.env)
        with torch.random.fork_rng(devices=[]):  # the template's init draws: not the run's
            num_params = _template(run, env)[1].num_params
        e.workers = default_workers(members or run.algo.population, resolve_device(e.device),
                                    env.traits, num_params, cpus)
    e.env_threads = e.env_threads or (1 if e.workers > 1 else cpus)
    return cfg


@dataclass(frozen=True)
class Replicas:
    """The replica factory of a distributed run: picklable (the resolved config as plain
    data), and called in each remote worker as ``replicas(cpus, members)``, it builds the
    same policy, optimizer and observation normaliser as the driver's ``build``, with a
    local evaluator laid out for that worker's ``cpus`` (``fit_to_cpus``), and subsets
    sized for chunks of ``members`` (what ``engine`` leaves automatic)."""

    config: dict

    def __call__(self, cpus: int, members: int) -> Built:
        cfg = from_dict(self.config)
        e = fit_to_cpus(cfg, cpus, members).engine
        if not (e.subsets or e.slots):
            e.subsets, e.slots = default_layout(-(-members // e.workers),  # each driver's
                                                resolve_device(e.device), env_spec(cfg.env).traits)
        return build(cfg)


def ray_evaluator(built: Built, **options):
    """A ``RayEvaluator`` for ``built`` (made with ``local=False``): replicas of its resolved
    config, following its optimizer and normaliser; ``options`` override the config's."""
    from neuroevo.dist.ray_backend import RayEvaluator

    e = built.config.engine
    options = {"actors": e.ray_actors, "address": e.ray_address, "timeout": e.ray_timeout,
               **options}
    return RayEvaluator(Replicas(to_dict(built.config)), built.optimizer, built.obs_norm,
                        population=built.config.algo.population, use_gpu=e.device != "cpu",
                        **options)


def build_run(cfg: Config, behaviour=None) -> Built:
    """``build(cfg)`` with the evaluator of ``cfg.engine.backend``: ``local``, the
    pipelined evaluator in this process; ``ray``, Ray actors (``neuroevo.dist``), which
    measure the env kind's own behaviour characterisation (a ``behaviour`` function stays
    local)."""
    check(cfg)  # before Ray starts
    if cfg.engine.backend == "local":
        return build(cfg, behaviour=behaviour)
    if behaviour is not None:
        raise ConfigError("a behaviour= function runs with engine.backend=local only; Ray's "
                          "actors measure the env kind's own behaviour characterisation")
    built = build(cfg, local=False)
    return replace(built, evaluator=ray_evaluator(built))
