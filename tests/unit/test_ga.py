import math

import numpy as np
import pytest
import torch

from neuroevo import GA, NoiseTable, RandomSearch, SeedChain
from neuroevo.errors import ConfigError
from neuroevo.optim.schedules import Exponential


def rastrigin(p: torch.Tensor) -> torch.Tensor:
    return 10 * p.shape[1] + (p**2 - 10 * torch.cos(2 * math.pi * p)).sum(1)


def run(opt, generations):
    """Drive an optimizer through ask/tell only; return the first generation's mean fitness."""
    first = None
    while opt.state.generation < generations:
        pop = opt.ask()
        m = opt.tell((-rastrigin(pop.params())).tolist())
        first = m["fitness_mean"] if first is None else first
    return first


@pytest.mark.parametrize("cls, kw", [(GA, {"truncation": 10, "sigma": 0.1}), (RandomSearch, {})])
def test_improves_20d_rastrigin(cls, kw):
    noise = NoiseTable(seed=1, size=1 << 16)
    opt = cls(20, init_std=2.0, population_size=100, elite_candidates=5, validation_episodes=2,
              seed=3, noise=noise, **kw)
    initial_mean = run(opt, 40)
    elite = opt.decoder().decode(opt.elite)[None]
    assert -rastrigin(elite).item() == opt.state.elite_score  # the reported score is real
    # Random search can only get lucky; the GA must descend far below random networks.
    assert opt.state.elite_score > initial_mean + (50 if cls is RandomSearch else 180)
    assert len(opt.state.history) == 40


def test_ga_beats_random_search_on_the_same_budget():
    noise = NoiseTable(seed=1, size=1 << 16)
    kw = dict(init_std=2.0, population_size=100, elite_candidates=0, seed=5, noise=noise)
    ga, rs = GA(20, truncation=10, sigma=0.1, **kw), RandomSearch(20, **kw)
    run(ga, 40), run(rs, 40)
    assert ga.state.elite_score > rs.state.elite_score + 50


def make_ga(**kw):
    base = dict(population_size=12, truncation=3, elite_candidates=2, validation_episodes=3,
                seed=11, noise=NoiseTable.shared(7, 1 << 16))
    return GA(50, **{**base, **kw})


def test_generation_structure_selection_and_elite_carried_unmodified():
    ga = make_ga(sigma=Exponential(0.1, 0.5))
    pop = ga.ask()
    assert pop.phase == "train" and all(len(g) == 0 for g in pop)  # random initialisations
    f = np.arange(12.0)[::-1].copy()  # member 0 best ... member 11 worst
    m = ga.tell(f)
    assert not m["generation_done"] and ga.state.best == pop[0] and ga.state.best_fitness == 11.0

    val = ga.ask()
    assert val.phase == "validate" and val.generation == 0
    assert val.genomes == [pop[0]] * 3 + [pop[1]] * 3
    # Candidate 1 (second in training) has the better validation mean: it becomes the elite.
    m = ga.tell([1.0, 1.0, 1.0, 5.0, 0.0, 4.0])
    assert m["generation_done"] and m["elite_score"] == 3.0 and ga.elite == pop[1]
    assert m["candidate_means"] == [1.0, 3.0]
    # The parents: the elite, then the T - 1 = 2 best others by training fitness.
    assert ga.state.parents == (pop[1], pop[0], pop[2])

    nxt = ga.ask()
    assert nxt.generation == 1 and nxt[0] == pop[1]  # the elite, unmodified
    assert torch.equal(nxt.member_params(0), pop.member_params(1))
    for child in nxt.genomes[1:]:
        assert child.parent in ga.state.parents and child.mutations[-1][1] == 0.1 * 0.5
    assert len({c.parent for c in nxt.genomes[1:]}) == 3  # parents chosen among all T


def test_validation_off_takes_best_single_episode():
    for kw in ({"elite_candidates": 0}, {"validation_episodes": 0}):
        ga = make_ga(**kw)
        pop = ga.ask()
        f = np.zeros(12)
        f[7] = 9.0
        m = ga.tell(f)
        assert m["generation_done"] and ga.elite == pop[7] and m["elite_score"] == 9.0
        assert ga.ask().phase == "train"


def test_same_seed_same_genomes_other_seed_other_genomes():
    a, b, c = make_ga(), make_ga(), make_ga(seed=12)
    for _ in range(3):
        pa, pb, pc = a.ask(), b.ask(), c.ask()
        assert pa.genomes == pb.genomes and pa.genomes != pc.genomes
        f = np.random.default_rng(len(pa)).normal(size=len(pa))
        a.tell(f), b.tell(f), c.tell(f)


def test_algorithm_1_an_elite_with_the_worst_training_episode_still_competes_and_breeds():
    """Such et al. (v3) Algorithm 1 worked by hand: N = 6, T = 2, 3 candidates, 2 episodes."""
    ga = GA(4, population_size=6, truncation=2, elite_candidates=3, validation_episodes=2,
            seed=0, noise=NoiseTable.shared(7, 1 << 16))
    g0 = ga.ask()
    ga.tell([5.0, 1.0, 4.0, 0.0, 3.0, 2.0])
    val = ga.ask()  # generation 1 of the paper: the 3 best by training fitness
    assert val.genomes == [g0[0]] * 2 + [g0[2]] * 2 + [g0[4]] * 2
    ga.tell([1.0, 1.0, 9.0, 9.0, 2.0, 2.0])
    assert ga.elite == g0[2] and ga.state.elite_score == 9.0
    assert ga.state.parents == (g0[2], g0[0])  # the elite and the best other (5.0)

    g1 = ga.ask()
    assert g1[0] == g0[2]  # carried unmodified as member 0
    ga.tell([-100.0, 1.0, 2.0, 3.0, 4.0, 5.0])  # the elite's own episode is the worst
    val = ga.ask()  # the previous elite, then the 2 best others
    assert val.genomes == [g0[2]] * 2 + [g1[5]] * 2 + [g1[4]] * 2
    ga.tell([7.0, 7.0, 6.0, 6.0, 0.0, 0.0])
    assert ga.elite == g0[2] and ga.state.elite_score == 7.0  # re-scored, not 9.0 kept
    assert ga.state.parents == (g0[2], g1[5])  # it still breeds, with the best other
    assert {c.parent for c in ga.ask().genomes[1:]} <= {g0[2], g1[5]}

    g2 = ga.ask()
    ga.tell([-100.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert ga.ask().genomes == [g0[2]] * 2 + [g2[5]] * 2 + [g2[4]] * 2
    ga.tell([0.0, 0.0, 8.0, 8.0, 1.0, 1.0])  # a child beats the previous elite
    assert ga.elite == g2[5] and ga.state.elite_score == 8.0
    assert ga.state.parents == (g2[5], g2[4])  # the old elite ranked last: no longer a parent


def test_random_search_rescores_its_elite_every_generation():
    rs = RandomSearch(5, population_size=4, elite_candidates=2, validation_episodes=2,
                      noise=NoiseTable.shared(7, 1 << 16))
    g0 = rs.ask()
    assert all(len(g) == 0 for g in g0)  # fresh random networks
    rs.tell([5.0, 0.0, 4.0, 0.0])
    assert rs.ask().genomes == [g0[0]] * 2 + [g0[2]] * 2
    rs.tell([10.0, 10.0, 1.0, 1.0])
    g1 = rs.ask()
    assert g1[0] == g0[0] and all(len(g) == 0 for g in g1)  # the elite, then fresh ones
    assert not set(g1.genomes[1:]) & set(g0.genomes)
    rs.tell([0.0, 9.0, 0.0, 0.0])
    assert rs.ask().genomes == [g0[0]] * 2 + [g1[1]] * 2  # the old elite competes again
    rs.tell([2.0, 2.0, 3.0, 3.0])  # re-scored lower than in generation 0
    assert rs.elite == g1[1] and rs.state.elite_score == 3.0
    assert rs.state.history == [10.0, 3.0]  # a fresh measurement, not the best ever


@pytest.mark.parametrize("cls, kw", [(GA, {"truncation": 3}), (RandomSearch, {})])
def test_train_episodes_rank_members_on_their_mean(cls, kw):
    """Two training episodes a member (adjacent) select as one episode scoring their mean:
    the same candidates, elite, parents and next generation, against a run told the means."""
    noise = NoiseTable.shared(7, 1 << 16)
    two = cls(4, population_size=6, elite_candidates=2, validation_episodes=2, seed=4,
              noise=noise, train_episodes=2, **kw)
    one = cls(4, population_size=6, elite_candidates=2, validation_episodes=2, seed=4,
              noise=noise, **kw)
    rng = np.random.default_rng(0)
    for _ in range(3):
        pair, single = two.ask(), one.ask()
        assert pair.genomes == [g for g in single.genomes for _ in range(2)]
        episodes = rng.integers(0, 10, size=(6, 2)).astype(float)
        episodes[1] = [9.0, 0.0]  # the best single episode, not the best mean
        two.tell(episodes.ravel())
        one.tell(episodes.mean(axis=1))
        assert two.state.best == single[1] != one.state.best
        assert two.state.best_fitness == 9.0
        assert two.ask().genomes == one.ask().genomes  # validation: the same candidates
        scores = rng.normal(size=4)
        two.tell(scores), one.tell(scores)
        assert (two.elite, two.state.parents) == (one.elite, one.state.parents)
    assert cls(4, noise=noise, population_size=12, **kw).train_episodes == 1  # the paper
    with pytest.raises(ConfigError, match="train_episodes must be an integer >= 1"):
        cls(4, noise=noise, population_size=12, train_episodes=0, **kw)


def test_init_std_tensor_and_center():
    noise = NoiseTable.shared(7, 1 << 16)
    std = torch.tensor([0.0, 1.0, 2.0])
    ga = GA(center=torch.tensor([5.0, 5.0, 5.0]), init_std=std, population_size=4, truncation=1,
            elite_candidates=0, noise=noise)
    p = ga.ask().params()
    eps = torch.stack([noise.slice(g.init_seed, 3) for g in ga.ask()])
    assert torch.equal(p, 5.0 + eps * std)
    assert SeedChain.from_json(ga.ask()[0].to_json()) == ga.ask()[0]
