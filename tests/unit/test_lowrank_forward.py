"""The low-rank forward pass: slots hold factors and share bases; outputs equal the
materialised members' through the template (vmap reference), whatever the rows around."""

import numpy as np
import pytest
import torch

from neuroevo import GA, NoiseTable, OpenAIES
from neuroevo.lowrank import LowRank
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.lowrank import CHUNK, LowRankSlots
from neuroevo.policy.nets import build_template


def policy_and(rank: int):
    template, spec = build_template("mlp", (11,), 3, (24, 20))
    return BatchedPolicy(template, spec, lowrank=LowRank([e.shape for e in spec], rank)), spec


def es_population(spec, rank, n=40):
    noise = NoiseTable(seed=1, size=1 << 16)
    es = OpenAIES(center=torch.randn(spec.num_params) * 0.3, population_size=n, sigma=0.5,
                  noise=noise, rank=rank, shapes=[e.shape for e in spec], seed=2)
    return es.ask()


def fill(slots, pop, rows, members):
    for row, m in zip(rows, members, strict=True):
        slots.load_lowrank(row, *pop.member_lowrank(m))


@pytest.mark.parametrize("rank", [1, 3])
def test_es_slots_equal_the_materialised_members(rank):
    policy, spec = policy_and(rank)
    pop = es_population(spec, rank)
    slots = policy.slot_storage(len(pop))
    assert isinstance(slots, LowRankSlots)
    fill(slots, pop, range(len(pop)), range(len(pop)))
    assert len(slots.bases) == 1  # one centre for the whole population
    for a, b in zip(slots.a.values(), slots.b.values(), strict=True):  # factors, not weights
        assert a.shape[2] == b.shape[1] == rank and {a.shape[1], b.shape[2]} <= {24, 20, 3, 11}
    obs = torch.randn(len(pop), 11)
    out = policy.forward(slots.prefix(len(pop)), obs)
    torch.testing.assert_close(out, policy.reference(pop.params(), obs), rtol=1e-5, atol=1e-5)


def test_a_rows_outputs_do_not_depend_on_the_rows_around_it():
    policy, spec = policy_and(2)
    pop = es_population(spec, 2)
    obs = torch.randn(len(pop), 11)
    slots = policy.slot_storage(len(pop))
    fill(slots, pop, range(len(pop)), range(len(pop)))
    alone = policy.forward(slots.prefix(len(pop)), obs)
    rng = np.random.default_rng(0)
    for count in (1, 2, 3, CHUNK - 1, CHUNK, CHUNK + 1, 33):
        members = rng.permutation(len(pop))[:count]
        other = policy.slot_storage(count + 2)
        fill(other, pop, range(count), members)
        out = policy.forward(other.prefix(count), obs[members])
        assert torch.equal(out, alone[members]), count
    other.move(count - 1, 0)  # an idle slot takes the last running row: the same network
    assert torch.equal(policy.forward(other.prefix(count - 1), obs[members[[-1]]].expand(
        count - 1, 11))[0], alone[members[-1]])


def test_ga_children_share_their_parents_and_equal_the_materialised_members():
    policy, spec = policy_and(1)
    noise = NoiseTable(seed=3, size=1 << 16)
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=12, truncation=3,
            elite_candidates=0, sigma=0.3, noise=noise, rank=1,
            shapes=[e.shape for e in spec], seed=4)
    for _ in range(2):
        pop = ga.ask()
        ga.tell(pop.params().sum(1).tolist())
    pop = ga.ask()
    slots = policy.slot_storage(len(pop))
    fill(slots, pop, range(len(pop)), range(len(pop)))
    assert len(slots.bases) <= 3 + 1  # the T parents (and the elite's parent), shared
    obs = torch.randn(len(pop), 11)
    out = policy.forward(slots.prefix(len(pop)), obs)
    torch.testing.assert_close(out, policy.reference(pop.params(), obs), rtol=1e-5, atol=1e-5)


def test_generation_zero_members_are_their_own_bases_and_full_members_load_too():
    policy, spec = policy_and(1)
    ga = GA(spec.num_params, init_std=spec.init_std(), population_size=5, truncation=2,
            elite_candidates=0, noise=NoiseTable(seed=3, size=1 << 16), rank=1,
            shapes=[e.shape for e in spec])
    pop = ga.ask()  # fresh random networks: no mutation yet
    slots = policy.slot_storage(6)
    fill(slots, pop, range(5), range(5))
    slots.load(5, pop.member_params(0) * 2)  # any full parameter vector
    assert len(slots.bases) == 6
    obs = torch.randn(6, 11)
    params = torch.cat([pop.params(), pop.member_params(0)[None] * 2])
    torch.testing.assert_close(policy.forward(slots.prefix(6), obs),
                               policy.reference(params, obs), rtol=1e-5, atol=1e-5)
    slots.move(5, 0)  # row 0's base is released when nothing uses it
    assert len(slots.bases) == 5


def test_a_full_member_loaded_after_a_move_is_the_new_member():
    """Each full member is a base of its own, whatever Python's ids of freed tensors are."""
    policy, spec = policy_and(1)
    obs = torch.randn(2, 11)
    slots = policy.slot_storage(2)
    for k in range(20):
        slots.load(1, torch.full((spec.num_params,), 0.01 * k))
        slots.move(1, 0)
        new = torch.randn(spec.num_params) * 0.1
        slots.load(1, new)
        out = policy.forward(slots.prefix(2), obs)
        torch.testing.assert_close(out[1], policy.reference(new[None], obs[1:])[0],
                                   rtol=1e-5, atol=1e-5)
    assert len(slots.bases) == 2


@pytest.mark.parametrize("rank", [1, 2])
def test_conv_net_slots_equal_the_materialised_members_whatever_the_rows_around(rank):
    """The small Atari net at low rank: each conv's base convolution, plus the grouped
    rank-r correction and its 1x1 mix, equals the materialised member's convolution."""
    template, spec = build_template("small", (4, 84, 84), 6)
    policy = BatchedPolicy(template, spec, lowrank=LowRank([e.shape for e in spec], rank))
    noise = NoiseTable(seed=1, size=1 << 22)
    es = OpenAIES(center=noise.slice(3, spec.num_params) * spec.init_std(), population_size=18,
                  sigma=0.05, noise=noise, rank=rank, shapes=[e.shape for e in spec])
    pop = es.ask()
    obs = torch.randint(0, 256, (18, 4, 84, 84), dtype=torch.uint8)
    slots = policy.slot_storage(18)
    fill(slots, pop, range(18), range(18))
    out = policy.forward(slots.prefix(18), obs)
    torch.testing.assert_close(out, policy.reference(pop.params(), obs), rtol=1e-4, atol=1e-4)
    for count in (1, 3):
        members = np.arange(18)[::-1][:count].copy()
        other = policy.slot_storage(count)
        fill(other, pop, range(count), members)
        assert torch.equal(policy.forward(other.prefix(count), obs[members]), out[members])
