"""The papers' test score: the elite on fresh episodes of their own seeds, outside the budget,
checked against gymnasium's own env played by hand."""

import gymnasium
import numpy as np
import pytest

from neuroevo import train
from neuroevo.engine.slots import episode_seed
from neuroevo.genomes import PHASES
from neuroevo.loop import Callback

CARTPOLE = dict(env__id="CartPole-v1", net__hidden="8", algo__population=8,
                algo__elite_candidates=2, algo__validation_episodes=2, engine__device="cpu",
                seed=2, budget__generations=3)
TESTS = ("test_score", "test_score_std", "test_episodes", "test_frames")


def test_each_phase_has_its_own_range_of_seeds():
    rng = np.random.default_rng(0)
    seen = {}
    for phase in PHASES:
        seeds = {episode_seed(int(s), int(g), phase, int(i))
                 for s, g, i in rng.integers(0, 1 << 20, (3000, 3))}
        assert all(PHASES.index(phase) << 29 <= s < (PHASES.index(phase) + 1) << 29
                   for s in seeds)
        seen[phase] = seeds
    assert not (seen["test"] & (seen["train"] | seen["validate"]))


class Elites(Callback):
    """The elite after each generation (the state at each boundary: rows may finish later)."""

    def __init__(self):
        self.elites, self.optimizer = {}, None

    def checkpoint(self, totals, history):
        self.elites[totals.generation - 1] = self.optimizer.decoder().decode(
            self.optimizer.elite).clone()


def play_by_hand(policy, params, seed: int) -> tuple[float, int]:
    """One CartPole-v1 episode in gymnasium's own env: the argmax of the network, to the
    env's own 500-step limit."""
    import torch

    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        out = policy.reference(params[None], torch.from_numpy(obs[None]).float())
        obs, reward, terminated, truncated, _ = env.step(int(out.argmax(1)))
        total, steps, done = total + reward, steps + 1, terminated or truncated
    env.close()
    return total, steps


def test_the_test_score_is_the_elite_on_its_own_seeds_outside_the_budget():
    elites = Elites()
    from neuroevo.build import build_run
    from neuroevo.config import Config, override
    from neuroevo.loop import Budget, Tests, generations

    cfg = Config()
    for key, value in {**CARTPOLE, "algo__test_episodes": 3, "algo__test_every": 2}.items():
        override(cfg, key.replace("__", "."), value)
    built = build_run(cfg)
    elites.optimizer = built.optimizer
    try:
        rows = generations(built.optimizer, built.evaluator, Budget.of(built.config),
                           callbacks=[elites], tests=Tests.of(built.config))
    finally:
        built.evaluator.close()
    assert built.config.env.test_episode_cap == 500  # resolved: gymnasium's own limit
    # test_every 2 over 3 generations: after generation 1, and after the last one (2)
    assert [all(k in r for k in TESTS) for r in rows] == [False, True, True]
    for g in (1, 2):
        played = [play_by_hand(built.policy, elites.elites[g], episode_seed(2, g, "test", i))
                  for i in range(3)]
        returns = [r for r, _ in played]
        assert rows[g]["test_score"] == pytest.approx(np.mean(returns))
        assert rows[g]["test_score_std"] == pytest.approx(np.std(returns))
        assert rows[g]["test_episodes"] == 3
        assert rows[g]["test_frames"] == sum(s for _, s in played)
    # Outside the budget, and the optimizer never told: a run without tests is the same run.
    plain = train(**CARTPOLE, algo__test_episodes=0).history
    keys = ("frames", "episodes", "fitness_max", "fitness_mean", "elite_score", "best_fitness")
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in plain]
    assert not any(k in r for r in plain for k in TESTS)
