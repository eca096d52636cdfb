import numpy as np
import pytest
import torch

from neuroevo.errors import ConfigError
from neuroevo.genomes import ChainDecoder, Perturbation, PerturbationDecoder, Population, SeedChain
from neuroevo.noise import NoiseTable

D = 1000


def explicit_sum(noise, genome, init_std, init_mean=None):
    """The chain written out in numpy float32: init, then each mutation in order."""
    table = noise.table().numpy()

    def eps(seed):
        k = noise.offset(seed, D)
        return table[k : k + D]

    theta = eps(genome.init_seed) * np.float32(init_std)
    if init_mean is not None:
        theta = init_mean + theta
    for seed, sigma in genome.mutations:
        theta = theta + eps(seed) * np.float32(sigma)
    return torch.from_numpy(theta)


def random_chain(rng, length):
    g = SeedChain(int(rng.integers(2**32)))
    for _ in range(length):
        g = g.mutate(int(rng.integers(2**32)), float(rng.choice([0.002, 0.005, 0.1])))
    return g


class CountingTable(NoiseTable):
    """A real table that counts the slices read: one slice per mutation applied."""

    reads = 0

    def slice(self, seed, length, device=None):
        self.reads += 1
        return super().slice(seed, length, device)


def test_decode_equals_explicit_sum_of_mutations(noise):
    rng = np.random.default_rng(0)
    mean = np.linspace(-1, 1, D, dtype=np.float32)
    for length in (0, 1, 7, 40):
        g = random_chain(rng, length)
        assert torch.equal(ChainDecoder(noise, D, init_std=0.5).decode(g),
                           explicit_sum(noise, g, 0.5))
        dec = ChainDecoder(noise, D, init_mean=mean, init_std=0.5)
        assert torch.equal(dec.decode(g), explicit_sum(noise, g, 0.5, mean))


def test_cached_and_uncached_decode_agree_exactly(noise):
    rng = np.random.default_rng(1)
    cached = ChainDecoder(noise, D, cache_size=8)
    uncached = ChainDecoder(noise, D, cache_size=0)
    parents = [random_chain(rng, 5) for _ in range(3)]
    for _ in range(6):  # a family tree several generations deep, decoded as a GA would
        children = [parents[i % 3].mutate(int(rng.integers(2**32)), 0.01) for i in range(9)]
        for c in children:
            a, b = cached.decode(c), uncached.decode(c)
            assert torch.equal(a, b) and torch.equal(a, cached.replay(c))
        parents = children[:3]


def test_decoding_a_child_of_a_cached_parent_costs_one_mutation():
    table = CountingTable(seed=3, size=1 << 14)
    dec = ChainDecoder(table, D, cache_size=4)
    parent = random_chain(np.random.default_rng(2), 30)
    dec.decode(parent.mutate(1, 0.1))  # replays the chain once, keeps the parent
    assert table.reads == 32
    table.reads = 0
    for seed in range(2, 12):
        dec.decode(parent.mutate(seed, 0.1))
    assert table.reads == 10
    table.reads = 0
    dec.decode(parent.mutate(5, 0.1).mutate(6, 0.1))  # grandchild: its parent is decoded once
    assert table.reads == 2


def test_recursion_free_replay_of_a_long_chain():
    noise = NoiseTable(seed=3, size=1 << 12)
    g = random_chain(np.random.default_rng(3), 3000)
    dec = ChainDecoder(noise, 16)
    assert torch.equal(dec.decode(g), dec.replay(g))


def test_json_round_trip_is_exact_and_small():
    rng = np.random.default_rng(4)
    g = SeedChain(12345)
    for i in range(1000):  # a 1,000-generation elite with a sigma schedule
        g = g.mutate(int(rng.integers(2**32)), 0.002 if i < 600 else 0.001)
    text = g.to_json(noise={"seed": 123, "size": 1 << 25})
    assert SeedChain.from_json(text) == g
    assert len(text) < 6000
    assert SeedChain.from_json(SeedChain(7).to_json()) == SeedChain(7)


@pytest.mark.parametrize("text", ["{}", "not json", '{"format": "neuroevo.seedchain/1"}',
                                  '{"format":"neuroevo.seedchain/1","init_seed":1,"seeds":"AQAAAA==",'
                                  '"sigmas":[[0.1,2]]}'])
def test_bad_json_is_a_clear_error(text):
    with pytest.raises(ConfigError, match=r"not a neuroevo\.seedchain/1 genome document"):
        SeedChain.from_json(text)


def test_perturbation_decode(noise):
    center = torch.linspace(-1, 1, D)
    dec = PerturbationDecoder(noise, center, 0.02)
    eps = noise.slice(11, D)
    assert torch.equal(dec.decode(Perturbation(11, 1)), center + eps * 0.02)
    assert torch.equal(dec.decode(Perturbation(11, -1)), center + eps * -0.02)


def test_population_materialises_members(noise):
    genomes = [SeedChain(i) for i in range(5)]
    pop = Population(genomes, 0, "train", lambda dev: ChainDecoder(noise, D, device=dev))
    p = pop.params()
    assert p.shape == (5, D) and p.dtype == torch.float32
    assert torch.equal(pop.params(indices=[3, 1]), p[[3, 1]])
    assert torch.equal(pop.member_params(2), p[2]) and pop[2] == genomes[2]
