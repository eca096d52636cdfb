import numpy as np
import pytest
import torch

from neuroevo import NoiseTable, OpenAIES
from neuroevo.dist.replica import fingerprint


def test_sphere_100d_from_100_to_below_1e_2():
    noise = NoiseTable(seed=0, size=1 << 20)
    es = OpenAIES(center=torch.ones(100), population_size=100, seed=0, noise=noise)
    assert float((es.center**2).sum()) == 100.0
    for _ in range(300):
        pop = es.ask()
        es.tell((-(pop.params() ** 2).sum(1)).tolist())
    assert float((es.center**2).sum()) < 1e-2


def test_update_equals_hand_computed_adam_steps():
    noise = NoiseTable(seed=2, size=1 << 12)
    lr, l2, sigma, b1, b2, eps = 0.01, 0.005, 0.02, 0.9, 0.999, 1e-8
    c = np.array([1.0, -2.0, 0.5])
    es = OpenAIES(center=torch.tensor(c), population_size=4, seed=9, noise=noise)
    m = v = np.zeros(3)
    for t, f in enumerate(([3.0, 1.0, -2.0, 7.0], [0.0, 4.0, 4.5, -1.0]), start=1):
        pop = es.ask()
        seeds = [g.seed for g in pop.genomes[0::2]]
        assert [g.sign for g in pop] == [1, -1, 1, -1]
        assert [g.seed for g in pop.genomes[1::2]] == seeds  # antithetic pairs share the noise
        e = np.stack([noise.slice(s, 3).numpy().astype(np.float64) for s in seeds])
        members = pop.params().numpy()
        assert np.allclose(members[0::2], c + sigma * e, atol=1e-6)
        assert np.allclose(members[1::2], c - sigma * e, atol=1e-6)
        # Centered ranks by hand: f = [3, 1, -2, 7] ranks [2, 1, 0, 3] -> r/3 - 0.5.
        order = np.argsort(f, kind="stable")
        r = np.empty(4)
        r[order] = np.arange(4)
        r = r / 3 - 0.5
        g = ((r[0] - r[1]) * e[0] + (r[2] - r[3]) * e[1]) / 4
        grad = -g + l2 * c
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        a = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        c = c - a * m / (np.sqrt(v) + eps)
        metrics = es.tell(f)
        assert np.allclose(es.center.numpy(), c, atol=1e-6), t
        assert metrics["grad_norm"] == pytest.approx(np.linalg.norm(g), rel=1e-5)
    assert es.state.adam.t == 2


def test_raw_shaping_uses_returns_as_given():
    noise = NoiseTable(seed=2, size=1 << 12)
    es = OpenAIES(3, population_size=2, shaping="none", noise=noise)
    pop = es.ask()
    e = noise.slice(pop[0].seed, 3)
    assert torch.allclose(es.gradient(pop, np.array([5.0, 1.0])), (5.0 - 1.0) * e / 2)


def test_centre_population_is_the_updated_centre_and_asking_it_changes_nothing():
    noise = NoiseTable(seed=2, size=1 << 12)
    plain = OpenAIES(center=torch.ones(5), population_size=4, seed=1, noise=noise)
    es = OpenAIES(center=torch.ones(5), population_size=4, seed=1, noise=noise,
                  center_episodes=3)
    assert plain.center_population() is None
    for generation in range(2):
        f = [1.0, 4.0, 2.0, 3.0]
        plain.ask()
        plain.tell(f)
        assert es.ask().phase == "train"
        assert es.tell(f)["generation_done"]  # the centre's episodes are no phase of ask/tell
        pop = es.center_population()
        assert pop.phase == "validate" and not pop.budgeted and len(pop) == 3
        assert pop.generation == generation  # seeded as the generation that made it
        assert all(torch.equal(p, es.center) for p in pop.params())
        assert es.state.generation == plain.state.generation
        assert torch.equal(es.center, plain.center) and es.ask().phase == "train"
        assert fingerprint(es, None) == fingerprint(plain, None)
    assert es.state.best_fitness == 4.0
