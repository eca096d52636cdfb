"""``neuroevo play``: score a run's saved policy on fresh episodes and record one (GIF/MP4).

The policy is the GA/RS elite or the ES centre of the last checkpoint. Play episodes are
seeded from the run seed under a generation number no training run reaches, so they are
reproducible and never the episodes the policy was selected on. Videos show Atari games
(the network's 84x84 input frames) and the MuJoCo locomotion tasks (rendered offscreen by
MuJoCo, EGL when there is no display).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.checkpoint import RunDir
from neuroevo.engine.slots import episode_seed
from neuroevo.envs.gym import GymPool
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.evaluation import evaluate_one
from neuroevo.genomes import Population
from neuroevo.policy.heads import to_actions
from neuroevo.video import check_path, write

PLAY_GENERATION = 2**40  # outside any training run: fresh episodes


class _Fixed:
    """A decoder that always gives the same parameters (one policy, many episodes)."""

    def __init__(self, params: torch.Tensor):
        self.params = params

    def decode(self, genome) -> torch.Tensor:
        return self.params


def saved_policy(run_dir: RunDir, genome: str = "elite", member: int | None = None):
    """``(built, params [D])``: the run's objects and what it deploys (its elite or its
    centre: ``Optimizer.deploys``), or with ``genome="best"`` the member with the best single
    training episode (an elite deployer's), or with ``member`` a member of the run's
    archive (MAP-Elites: a grid cell; the NS-ES family: a centre of its meta-population)."""
    if genome not in ("elite", "best"):
        raise ConfigError(f"--genome must be elite or best, got {genome!r}")
    cfg = run_dir.load_config()
    state = run_dir.load(cfg)
    cfg.engine.slots = cfg.engine.subsets = 0  # automatic layout for the play population
    built = build(cfg)
    run_dir.restore(built, state)
    optimizer = built.optimizer
    if genome == "best" and optimizer.deploys == "centre":
        built.evaluator.close()
        raise ConfigError(f"a {cfg.algo.name} run keeps no best member, only its centre; use "
                          "--genome elite")
    if member is not None:
        archived = getattr(optimizer, "member_params", None)
        if archived is None:
            built.evaluator.close()
            raise ConfigError(f"a {cfg.algo.name} run keeps no archive of members; --member "
                              "picks a MAP-Elites cell or an NS-ES centre")
        try:
            return built, archived(member)
        except ConfigError:
            built.evaluator.close()
            raise
    params = optimizer.deployed_params() if genome == "elite" else optimizer.best_params()
    if params is None:
        built.evaluator.close()
        raise CheckpointError(f"{run_dir.path} has no {genome} yet; play it after a generation")
    return built, params


def play(run_dir: RunDir, episodes: int, video: str | None = None, genome: str = "elite",
         episode_cap: int | None = None, member: int | None = None
         ) -> tuple[np.ndarray, float | None]:
    """Scores of ``episodes`` fresh episodes of at most ``episode_cap`` agent steps (default:
    the run's test cap, as its test score); with ``video`` (.gif or .mp4), the first one
    recorded and its score. ``genome``, ``member``: what plays (``saved_policy``)."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    if episode_cap is not None and episode_cap < 1:
        raise ConfigError(f"--episode-cap must be >= 1, got {episode_cap}")
    if video is not None:
        check_path(video)
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("MUJOCO_GL", "egl")  # read when mujoco is first imported
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (gymnasium's drawing)
    built, params = saved_policy(run_dir, genome, member)
    cap = episode_cap or built.config.env.test_episode_cap
    if video is not None and built.env.traits.video is None:
        built.evaluator.close()
        raise ConfigError(f"--video has no renderer for {built.env.name} here (Atari, MuJoCo "
                          "and gymnasium envs have one): leave --video out")
    try:
        pop = Population([None] * episodes, PLAY_GENERATION, "validate",
                         lambda device: _Fixed(params.to(device)))
        scores = evaluate_one(built.evaluator, pop, episode_cap=cap).fitness
    finally:
        built.evaluator.close()
    recorded = None
    if video is not None:
        seed = episode_seed(built.config.seed, PLAY_GENERATION, "validate", 0)
        recorded = record(built, params, seed, video, cap)
    return scores, recorded


def record(built, params: torch.Tensor, seed: int, path: str, cap: int | None) -> float:
    """Replay the episode of ``seed`` (the first play episode, cut at ``cap`` agent steps),
    save its frames, return its score (equal to the evaluator's: same seed, same actions, no
    action noise)."""
    kind = built.env.traits.video
    pool = GymPool(built.env.name, 1, render=True) if kind == "render" else built.env.make_pool(1)
    # Two identical rows, built once: a batch of one would take other kernels (see
    # BatchedPolicy.forward) and copy the weights every step.
    layers = built.policy.slot_layers(torch.stack([params, params]))
    normalize = built.obs_norm.frozen(params.device) if built.obs_norm is not None else None
    camera = _Camera(pool) if kind == "camera" else None

    def frame():
        if camera is not None:
            return camera.frame()
        if kind == "render":
            return pool.frame()
        return np.kron(obs[0, -1], np.ones((2, 2), np.uint8))  # [168, 168] newest frame

    frames, steps, score = [], 0, 0.0
    try:
        obs = pool.reset(np.ones(1, dtype=bool), [seed])
        while True:
            frames.append(frame())
            x = torch.from_numpy(obs).to(params.device).expand(2, *obs.shape[1:])
            out = built.policy.forward(layers, normalize(x) if normalize is not None else x)[:1]
            pool.send(to_actions(out, built.env.action))
            obs, reward, done = pool.recv()
            score += float(reward[0])
            steps += 1
            if done[0] or (cap is not None and steps >= cap):
                break
        frames.append(frame())  # the state the episode ended in
    finally:
        if camera is not None:
            camera.close()
        pool.close()
    if kind == "frames":
        fps = 15  # real time: an Atari agent step is 4 frames of 60 Hz
    elif kind == "render":
        fps = pool.fps  # the env's own render_fps
    else:
        fps = round(1 / pool.sims.dt)  # a MuJoCo step is dt seconds
    write(path, frames, fps=fps)
    return score


class _Camera:
    """Offscreen frames of a MuJoCo pool's first env, the camera following the torso."""

    def __init__(self, pool):
        import mujoco

        self.data, self.mujoco = pool.sims.datas[0], mujoco
        self.renderer = mujoco.Renderer(pool.sims.model, 360, 480)
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self.camera.trackbodyid, self.camera.distance, self.camera.elevation = 1, 4.0, -20.0

    def frame(self) -> np.ndarray:
        self.renderer.update_scene(self.data, camera=self.camera)
        return self.renderer.render()  # [360, 480, 3] uint8

    def close(self) -> None:
        self.renderer.close()
