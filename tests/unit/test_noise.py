import numpy as np
import pytest
import torch

from neuroevo.errors import ConfigError
from neuroevo.noise import NoiseTable, default_size, mix64, mix64_array


def test_table_values_are_pinned():
    # Genomes saved on one machine must decode identically on another: pin the stream.
    t = NoiseTable(seed=123, size=1000)
    expected = np.array([-0.03328682482242584, 1.1667463779449463, -0.5064895153045654],
                        dtype=np.float32)
    assert torch.equal(t.table()[:3], torch.from_numpy(expected))
    assert t.table().dtype == torch.float32


def test_prefix_does_not_depend_on_size():
    assert torch.equal(NoiseTable(5, 100).table(), NoiseTable(5, 1000).table()[:100])


def test_slice_is_a_view_at_a_seed_determined_offset():
    t = NoiseTable(seed=1, size=10_000)
    k = t.offset(99, 50)
    assert 0 <= k <= 10_000 - 50
    s = t.slice(99, 50)
    assert torch.equal(s, t.table()[k : k + 50])
    assert s.data_ptr() == t.table()[k:].data_ptr()  # no copy
    assert t.offset(99, 50) == k


def test_offsets_spread_over_the_table():
    t = NoiseTable(seed=1, size=1 << 20)
    offsets = [t.offset(s, 1000) for s in range(2000)]
    assert len(set(offsets)) == 2000
    assert max(offsets) > 0.9 * t.size and min(offsets) < 0.1 * t.size


def test_mix64_is_splitmix64():
    # First output of SplitMix64 seeded with 0 (Vigna's reference implementation).
    assert mix64(0) == 0xE220A8397B1DCDAF
    xs = [0, 1, 12345, 2**63 + 7, 2**64 - 1]
    assert mix64_array(np.array(xs, dtype=np.uint64)).tolist() == [mix64(x) for x in xs]


def test_genome_longer_than_table_is_a_clear_error():
    with pytest.raises(ConfigError, match="genome length must be between 1 and the noise table"):
        NoiseTable(seed=0, size=100).slice(3, 101)


def test_shared_tables_are_one_object_per_spec():
    assert NoiseTable.shared(3, 64) is NoiseTable.shared(3, 64)
    assert NoiseTable.shared(3, 64) is not NoiseTable.shared(4, 64)


def test_default_size():
    assert default_size(10) == 1 << 25
    assert default_size(4_052_658) == 1 << 25
    assert default_size(5_000_000) == 40_000_000
