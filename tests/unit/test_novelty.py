"""Novelty and the NS-ES family against the authors' code and updates worked by hand."""

import math

import numpy as np
import pytest
import torch

from neuroevo import serial
from neuroevo.checkpoint import state_types
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.noise import NoiseTable
from neuroevo.optim import novelty as novelty_module
from neuroevo.optim.gans import GANS
from neuroevo.optim.novelty import novelty, population_novelty
from neuroevo.optim.nses import NSRAES, NSRES, NoveltyES
from neuroevo.optim.shaping import centered_ranks

NOISE = NoiseTable.shared(7, 1 << 16)


def uber_novelty(archive, bc, k):
    """``compute_novelty_vs_archive`` of es_distributed/nses.py, a loop over the archive."""
    distances = np.array([np.linalg.norm(point - bc) for point in archive])
    return distances[distances.argsort()[:k]].mean()


def test_novelty_is_the_mean_distance_to_the_k_nearest_as_the_authors_code():
    rng = np.random.default_rng(0)
    archive, queries = rng.normal(size=(50, 3)), rng.normal(size=(7, 3))
    got = novelty(torch.as_tensor(archive), queries, 10)
    np.testing.assert_allclose(got, [uber_novelty(archive, q, 10) for q in queries], rtol=1e-12)
    # fewer points than k: the mean over all of them, as theirs
    np.testing.assert_allclose(novelty(torch.as_tensor(archive[:4]), queries, 10),
                               [uber_novelty(archive[:4], q, 10) for q in queries], rtol=1e-12)
    # (0, 0) against (3, 4) and (0, 1): distances 5 and 1
    assert novelty(torch.tensor([[3.0, 4.0], [0.0, 1.0]]), [[0.0, 0.0]], 1)[0] == 1.0
    assert novelty(torch.tensor([[3.0, 4.0], [0.0, 1.0]]), [[0.0, 0.0]], 2)[0] == 3.0


def test_novelty_does_not_depend_on_the_chunking(monkeypatch):
    rng = np.random.default_rng(1)
    archive, queries = torch.as_tensor(rng.normal(size=(40, 2))), rng.normal(size=(11, 2))
    whole = novelty(archive, queries, 5)
    monkeypatch.setattr(novelty_module, "CHUNK", 3)
    np.testing.assert_array_equal(novelty(archive, queries, 5), whole)


@pytest.mark.parametrize("k, bcs, message", [
    (0, [[0.0, 0.0]], r"k must be an integer >= 1"),
    (2, [[0.0, 0.0, 0.0]], r"behaviour characterisations of shape \[1, 3\] do not match the "
                           r"archive's 2 dimensions"),
])
def test_bad_novelty_queries_are_one_line(k, bcs, message):
    with pytest.raises(ConfigError, match=message):
        novelty(torch.zeros(3, 2), bcs, k)


def make(cls=NoveltyES, **kw):
    centers = torch.tensor([[0.5, -0.2, 0.1, 0.0], [-0.3, 0.4, 0.0, 0.2]])
    return cls(centers, population_size=4, sigma=0.1, lr=0.05, l2=0.0, k=10, seed=3,
               noise=NOISE, **kw)


def bc_of(pop):
    return pop.params()[:, :2].numpy()


def fitness_of(pop):
    return (-pop.params().pow(2).sum(1)).numpy()


def test_one_ns_es_generation_worked_by_hand():
    opt = make()
    first = opt.ask()  # every centre's behaviour, once
    assert (first.phase, len(first)) == ("validate", 2)
    opt.tell(fitness_of(first), bc_of(first))
    archive = opt.state.centers[:, :2].double()
    assert torch.equal(opt.state.archive, archive)

    train = opt.ask()  # antithetic pairs around centre 0, as the authors' first generation
    assert train.phase == "train" and opt.state.current == 0
    before = opt.state.centers[0].clone()
    bcs = bc_of(train)
    opt.tell(fitness_of(train), bcs)
    # by hand: each member's novelty against the two archived points (k = 10 > 2: both)
    nov = np.array([np.mean([math.dist(b, a) for a in archive.numpy()]) for b in bcs])
    shaped = centered_ranks(nov)
    eps = [NOISE.slice(g.seed, 4) for g in train.genomes[0::2]]
    g = sum(float(shaped[2 * i] - shaped[2 * i + 1]) * eps[i] for i in range(2)) / 4
    grad = -g  # Adam's first step: a = lr sqrt(1 - b2) / (1 - b1), m = 0.1 grad, v = 1e-3 grad^2
    a = 0.05 * math.sqrt(1 - 0.999) / (1 - 0.9)
    want = before - a * (0.1 * grad) / ((0.001 * grad * grad).sqrt() + 1e-8)
    torch.testing.assert_close(opt.state.centers[0], want, rtol=1e-6, atol=1e-7)

    check = opt.ask()  # the updated centre's behaviour joins the archive
    assert (check.phase, len(check)) == ("validate", 1)
    metrics = opt.tell(fitness_of(check), bc_of(check))
    assert metrics["generation_done"] and metrics["archive_size"] == 3
    torch.testing.assert_close(opt.state.archive[2], want[:2].double())
    # the next centre: drawn with probability proportional to its novelty
    points = opt.state.archive.numpy()
    p = np.array([np.mean(sorted(math.dist(c, q) for q in points)) for c in
                  opt.state.bcs.numpy()])
    p /= p.sum()
    assert opt.state.current == int(np.random.default_rng([3, 0, 1]).choice(2, p=p))


def test_nsr_es_scores_the_mean_of_the_reward_and_novelty_ranks():
    fitness, nov = np.array([1.0, 3.0, 2.0, 0.0]), np.array([0.1, 0.2, 0.4, 0.3])
    # reward ranks 1 3 2 0 -> -1/6 1/2 1/6 -1/2; novelty ranks 0 1 3 2 -> -1/2 -1/6 1/2 1/6
    np.testing.assert_allclose(make(NSRES).score(fitness, nov), [-1 / 3, 1 / 6, 1 / 3, -1 / 6])
    np.testing.assert_allclose(make(NoveltyES).score(fitness, nov), [-0.5, -1 / 6, 0.5, 1 / 6])
    nsra = make(NSRAES)
    nsra.state.weight = 0.25
    # 0.25 * reward rank + 0.75 * novelty rank
    np.testing.assert_allclose(nsra.score(fitness, nov),
                               [-0.25 / 6 - 0.375, 0.125 - 0.125, 0.25 / 6 + 0.375,
                                -0.125 + 0.125], atol=1e-15)


def test_nsra_es_weight_follows_the_schedule():
    opt = make(NSRAES, weight_delta=0.25, weight_patience=2)
    first = opt.ask()
    opt.tell(fitness_of(first), bc_of(first))
    weights = []
    for reward in (1.0, 0.5, 0.5, 0.2, 0.1, 2.0):
        train = opt.ask()
        opt.tell(fitness_of(train), bc_of(train))
        check = opt.ask()
        weights.append(opt.tell([reward], bc_of(check))["reward_weight"])
    # improve (w stays at its cap 1), flat, flat (-> 0.75), flat, flat (-> 0.5), improve
    assert weights == [1.0, 1.0, 0.75, 0.75, 0.5, 0.75]


def test_ns_es_spreads_its_archive_on_a_flat_reward():
    """Novelty alone moves the centres away from what the archive holds: on a constant
    reward, the behaviours (the first two parameters) spread out."""
    opt = make()
    spreads = []
    for _ in range(1 + 2 * 40):
        pop = opt.ask()
        opt.tell(np.zeros(len(pop)), bc_of(pop))
        if opt.state.archive is not None:
            spreads.append(float(torch.cdist(opt.state.archive, opt.state.archive).max()))
    assert spreads[-1] > 2 * spreads[0]


def test_the_archive_goes_through_a_checkpoint_as_tensors_and_resumes(tmp_path):
    opt = make(NSRAES)
    for _ in range(7):
        pop = opt.ask()
        opt.tell(fitness_of(pop), bc_of(pop))
    path = tmp_path / "state.safetensors"
    serial.save_file(str(path), opt.state_dict())
    _, tensors = serial.read_file(str(path))
    # the archive is stored as raw tensor bytes (safetensors), not as JSON numbers
    assert any(t.shape == opt.state.archive.shape and torch.equal(t, opt.state.archive)
               for t in tensors.values())
    resumed = make(NSRAES)
    resumed.load_state_dict(serial.load_file(str(path), state_types())[1])
    assert torch.equal(resumed.state.archive, opt.state.archive)
    for _ in range(6):
        a, b = opt.ask(), resumed.ask()
        assert a.genomes == b.genomes and torch.equal(a.params(), b.params())
        assert opt.tell(fitness_of(a), bc_of(a)) == resumed.tell(fitness_of(b), bc_of(b))


def test_a_checkpoint_of_another_meta_population_or_a_damaged_archive_is_refused():
    opt = make()
    pop = opt.ask()
    opt.tell(fitness_of(pop), bc_of(pop))
    three = NoveltyES(torch.zeros(3, 4), population_size=4, noise=NOISE)
    with pytest.raises(CheckpointError, match="meta-population has 2 centres but this run "
                                              "has 3"):
        three.load_state_dict(opt.state_dict())
    state = opt.state_dict()
    state["state"]["archive"] = torch.zeros(2, 5, dtype=torch.float64)
    with pytest.raises(CheckpointError, match=r"optimizer state.archive holds a float64 tensor "
                                              r"of shape \[2, 5\], expected shape \[n=2, d=2\]"):
        make().load_state_dict(state)


def test_population_novelty_counts_the_archive_and_the_others_but_not_itself():
    rng = np.random.default_rng(2)
    archive, members = rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    want = [uber_novelty(np.concatenate([archive, np.delete(members, i, 0)]), m, 4)
            for i, m in enumerate(members)]
    np.testing.assert_allclose(population_novelty(torch.as_tensor(archive), members, 4), want,
                               rtol=1e-12)
    want = [uber_novelty(np.delete(members, i, 0), m, 10) for i, m in enumerate(members)]
    np.testing.assert_allclose(population_novelty(None, members, 10), want, rtol=1e-12)


def test_ga_ns_breeds_the_most_novel_and_deploys_the_best_rewarded():
    ga = GANS(4, population_size=6, truncation=2, elite_candidates=0, k=2, seed=5,
              archive_probability=1.0, noise=NOISE)
    pop = ga.ask()
    # behaviours on a line: members 0 and 5 are the far ends, the most novel
    bcs = np.array([[-10.0, 0], [0.1, 0], [0.2, 0], [0.3, 0], [0.4, 0], [10.0, 0]])
    fitness = np.array([0.0, 1.0, 5.0, 2.0, 3.0, 0.5])
    metrics = ga.tell(fitness, bcs)
    assert set(ga.state.parents) == {pop[0], pop[5]}
    assert ga.state.elite == pop[2] and metrics["elite_score"] == 5.0
    assert metrics["archive_size"] == 6  # probability 1: every behaviour joins
    nothing = GANS(4, population_size=6, truncation=2, elite_candidates=0, seed=5,
                   archive_probability=0.0, noise=NOISE)
    nothing.ask()
    assert nothing.tell(fitness, bcs)["archive_size"] == 0


def test_ga_ns_with_train_episodes_scores_a_member_on_its_mean_reward_and_mean_behaviour():
    kw = dict(population_size=6, truncation=2, elite_candidates=0, k=2, seed=5,
              archive_probability=0.5, noise=NOISE)
    two, one = GANS(4, train_episodes=2, **kw), GANS(4, **kw)
    rng = np.random.default_rng(1)
    for _ in range(3):
        assert two.ask().genomes == [g for g in one.ask().genomes for _ in range(2)]
        fitness, bcs = rng.normal(size=(6, 2)), rng.normal(size=(6, 2, 3))
        a = two.tell(fitness.ravel(), bcs.reshape(12, 3))
        b = one.tell(fitness.mean(axis=1), bcs.mean(axis=1))
        assert a["novelty_mean"] == pytest.approx(b["novelty_mean"], rel=1e-12)
        assert (two.elite, two.state.parents) == (one.elite, one.state.parents)
        assert torch.allclose(two.state.archive, one.state.archive, rtol=1e-12, atol=0)
