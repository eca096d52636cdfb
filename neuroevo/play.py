"""``neuroevo play``: score a run's saved policy on fresh episodes and record one as a GIF.

The policy is the GA/RS elite or the ES centre of the last checkpoint. Play episodes are
seeded from the run seed under a generation number no training run reaches, so they are
reproducible and never the episodes the policy was selected on.
"""

from __future__ import annotations

import io

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.checkpoint import RunDir
from neuroevo.engine.slots import episode_seed
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.files import atomic_write
from neuroevo.genomes import Population

PLAY_GENERATION = 2**40  # outside any training run: fresh episodes


class _Fixed:
    """A decoder that always gives the same parameters (one policy, many episodes)."""

    def __init__(self, params: torch.Tensor):
        self.params = params

    def decode(self, genome) -> torch.Tensor:
        return self.params


def saved_policy(run_dir: RunDir, genome: str = "elite"):
    """``(built, params [D])``: the run's objects and its elite (GA/RS) or centre (ES), or with
    ``genome="best"`` the GA/RS member with the best single training episode."""
    if genome not in ("elite", "best"):
        raise ConfigError(f"--genome must be elite or best, got {genome!r}")
    cfg = run_dir.load_config()
    state = run_dir.load()
    cfg.engine.slots = cfg.engine.subsets = 0  # automatic layout for the play population
    built = build(cfg)
    built.restore(state)
    if cfg.algo.name == "es":
        if genome == "best":
            built.evaluator.close()
            raise ConfigError("an ES run keeps no best member, only its centre; use --genome "
                              "elite")
        return built, built.optimizer.center
    chosen = built.optimizer.elite if genome == "elite" else built.optimizer.state.best
    if chosen is None:
        built.evaluator.close()
        raise CheckpointError(f"{run_dir.path} has no {genome} yet; play it after a generation")
    return built, built.optimizer.decoder().decode(chosen)


def play(run_dir: RunDir, episodes: int, video: str | None = None, genome: str = "elite"
         ) -> tuple[np.ndarray, float | None]:
    """Scores of ``episodes`` fresh episodes; with ``video``, the first one as a GIF and its
    score."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    if video is not None and not video.lower().endswith(".gif"):
        raise ConfigError(f"--video must name a .gif file, got {video!r}")
    built, params = saved_policy(run_dir, genome)
    if video is not None and built.atari is None:
        built.evaluator.close()
        raise ConfigError("--video records Atari runs only (gymnasium envs would need their "
                          "own renderer); leave --video out")
    try:
        pop = Population([None] * episodes, PLAY_GENERATION, "validate",
                         lambda device: _Fixed(params.to(device)))
        scores = built.evaluator.evaluate(pop).fitness
    finally:
        built.evaluator.close()
    recorded = None
    if video is not None:
        seed = episode_seed(built.evaluator.seed, PLAY_GENERATION, "validate", 0)
        recorded = record(built, params, seed, video)
    return scores, recorded


def record(built, params: torch.Tensor, seed: int, path: str) -> float:
    """Replay the episode of ``seed`` (the first play episode), save its frames, return its
    score (equal to the evaluator's: same seed, same actions)."""
    from PIL import Image

    pool = built.make_pool(1)
    # Two identical rows, built once: a batch of one would take other kernels (see
    # BatchedPolicy.forward) and copy the weights every step.
    layers = {k: torch.stack([v, v]) for k, v in built.policy.spec.unflatten(params).items()}
    obs = pool.reset(np.ones(1, dtype=bool), [seed])
    frames, steps, score, cap = [obs[0, -1]], 0, 0.0, built.atari.episode_cap
    while True:
        x = torch.from_numpy(obs).to(params.device).expand(2, *obs.shape[1:])
        out = built.policy.forward(layers, x)[:1]
        pool.send(out.argmax(1).cpu().numpy().astype(np.int32))  # sync: the env needs it
        obs, reward, done = pool.recv()
        score += float(reward[0])
        frames.append(obs[0, -1])  # [84, 84] uint8, the newest frame of the stack
        steps += 1
        if done[0] or (cap is not None and steps >= cap):
            break
    pool.close()
    images = [Image.fromarray(f).resize((168, 168), Image.NEAREST) for f in frames]
    gif = io.BytesIO()
    images[0].save(gif, format="GIF", save_all=True, append_images=images[1:],
                   duration=1000 // 15, loop=0)
    atomic_write(path, gif.getvalue())
    return score
