"""Low-rank perturbations (EGGROLL): each matrix block a rank-r product read from the noise
table, biases at full rank; ES's update and GA's mutations against materialised references."""

import math

import numpy as np
import pytest
import torch

from neuroevo import GA, NoiseTable, OpenAIES, SeedChain
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.lowrank import LowRank
from neuroevo.optim.shaping import centered_ranks

SHAPES = [(6, 5), (6,), (3, 2, 2, 2), (3,), (2, 3)]  # dense, bias, conv [out, in, kh, kw], ...
D = sum(math.prod(s) for s in SHAPES)


def blocks(vector: torch.Tensor) -> list[torch.Tensor]:
    out, start = [], 0
    for s in SHAPES:
        n = math.prod(s)
        out.append(vector[start:start + n].view(s))
        start += n
    return out


@pytest.mark.parametrize("rank", [1, 2])
def test_each_matrix_block_is_a_rank_r_product_of_table_entries_and_each_bias_full(rank):
    noise = NoiseTable(seed=5, size=1 << 14)
    lr = LowRank(SHAPES, rank, D)
    v = lr.vector(noise, seed=11)
    assert v.shape == (D,) and torch.isfinite(v).all()
    table = noise.table()
    for block, part, offset in zip(lr.blocks, blocks(v), lr.offsets(noise, 11), strict=True):
        if len(block.shape) >= 2:
            matrix = part.reshape(block.shape[0], -1)
            assert int(torch.linalg.matrix_rank(matrix.double(), rtol=1e-5)) == rank
            out, inner = matrix.shape
            a = table[offset:offset + out * rank].view(out, rank)
            b = table[offset + out * rank:offset + (out + inner) * rank].view(inner, rank)
            expect = sum(torch.outer(a[:, j], b[:, j]) for j in range(rank)) / math.sqrt(rank)
            torch.testing.assert_close(matrix, expect)
        else:
            assert torch.equal(part, table[offset:offset + part.numel()])
    assert len(set(lr.offsets(noise, 11))) == len(SHAPES)  # every block reads its own noise
    assert not torch.equal(v, lr.vector(noise, seed=12))


def test_entries_have_unit_variance_as_full_rank_noise():
    """A @ B.T / sqrt(r) of standard normals: each entry has variance 1, whatever r."""
    noise = NoiseTable(seed=1, size=1 << 20)
    for rank in (1, 4):
        lr = LowRank([(64, 64)], rank)
        entries = torch.cat([lr.vector(noise, s) for s in range(200)])
        assert float(entries.var()) == pytest.approx(1.0, rel=0.05)


def test_the_stacked_product_equals_the_sum_of_materialised_perturbations():
    noise = NoiseTable(seed=2, size=1 << 14)
    lr = LowRank(SHAPES, 2, D)
    seeds, weights = [3, 99, 3, 1234, 7], [0.5, -1.25, 2.0, 0.0, 1.0]
    naive = torch.zeros(D, dtype=torch.float64)
    for s, w in zip(seeds, weights, strict=True):
        naive += w * lr.vector(noise, s).double()
    torch.testing.assert_close(lr.weighted_sum(noise, seeds, weights).double(), naive,
                               rtol=1e-5, atol=1e-5)


def test_low_rank_es_members_and_update_against_the_materialised_reference():
    noise = NoiseTable(seed=3, size=1 << 14)
    center = torch.linspace(-1, 1, D)
    es = OpenAIES(center=center, population_size=6, sigma=0.1, lr=0.05, l2=0.0, seed=4,
                  noise=noise, rank=1, shapes=SHAPES)
    lr = LowRank(SHAPES, 1, D)
    pop = es.ask()
    for i, genome in enumerate(pop.genomes):  # the exact [D] parameters
        eps = lr.vector(noise, genome.seed)
        torch.testing.assert_close(pop.member_params(i), center + genome.sign * 0.1 * eps)
    assert pop.genomes[0].seed == pop.genomes[1].seed  # still antithetic (seed, sign) pairs
    fitness = np.array([3.0, 1.0, -2.0, 5.0, 0.5, 0.25])
    shaped = centered_ranks(fitness)
    naive = torch.zeros(D, dtype=torch.float64)
    for i in range(0, 6, 2):  # the paper's g = sum (r+ - r-) eps / 2n, eps materialised
        naive += (shaped[i] - shaped[i + 1]) * lr.vector(noise, pop.genomes[i].seed).double()
    torch.testing.assert_close(es.gradient(pop, fitness).double(), naive / 6, rtol=1e-5,
                               atol=1e-6)


def test_low_rank_es_descends_a_sphere():
    noise = NoiseTable(seed=0, size=1 << 16)
    shapes = [(10, 10), (10,)]
    es = OpenAIES(center=torch.ones(110), population_size=40, seed=0, noise=noise, rank=1,
                  shapes=shapes, sigma=0.05, lr=0.05, l2=0.0)
    for _ in range(150):
        pop = es.ask()
        es.tell((-(pop.params() ** 2).sum(1)).tolist())
    assert float((es.center**2).sum()) < 0.1 * 110


def test_low_rank_ga_child_is_its_parent_plus_one_rank_r_term_per_matrix():
    noise = NoiseTable(seed=4, size=1 << 14)
    ga = GA(D, population_size=8, truncation=2, elite_candidates=0, seed=5, noise=noise,
            sigma=0.1, rank=2, shapes=SHAPES)
    for _ in range(3):
        pop = ga.ask()
        ga.tell(pop.params().sum(1).tolist())
    pop = ga.ask()
    decoder = ga.decoder()
    child = next(g for g in pop.genomes if len(g) >= 2)
    parent = decoder.replay(child.parent)
    delta = decoder.decode(child) - parent
    seed, sigma = child.mutations[-1]
    torch.testing.assert_close(delta, sigma * LowRank(SHAPES, 2, D).vector(noise, seed),
                               rtol=1e-4, atol=1e-6)
    for block, part in zip(SHAPES, blocks(delta), strict=True):
        if len(block) >= 2:
            assert int(torch.linalg.matrix_rank(part.reshape(block[0], -1).double(), rtol=1e-4)) == 2
    assert torch.equal(decoder.decode(child), decoder.replay(child))  # cached == from scratch
    assert isinstance(child, SeedChain)  # genomes stay seed chains


def test_bad_ranks_and_shapes_are_one_line_errors():
    with pytest.raises(ConfigError, match="rank must be an integer >= 0"):
        OpenAIES(D, population_size=2, rank=-1, shapes=SHAPES)
    with pytest.raises(ConfigError, match="larger than block 0's smaller side"):
        GA(D, population_size=4, rank=6, shapes=SHAPES)
    with pytest.raises(ConfigError, match=f"shapes hold {D} parameters but there are {D + 1}"):
        OpenAIES(D + 1, population_size=2, rank=1, shapes=SHAPES)
    with pytest.raises(ConfigError, match="rank > 0 needs shapes="):
        GA(D, population_size=4, rank=1)


def test_a_checkpoint_of_another_rank_is_refused():
    noise = NoiseTable(seed=0, size=1 << 12)
    low = OpenAIES(D, population_size=2, rank=1, shapes=SHAPES, noise=noise)
    full = OpenAIES(D, population_size=2, noise=noise)
    with pytest.raises(CheckpointError, match="rank=1 but this optimizer has 0"):
        full.load_state_dict(low.state_dict())
    full.load_state_dict(full.state_dict())
