import numpy as np
import pytest

from neuroevo.errors import ConfigError
from neuroevo.optim.shaping import centered_ranks, ranks, top_k, validate_fitness


def test_centered_ranks_hand_values():
    x = np.array([3.0, -1.0, 10.0, 0.5])
    # ranks 2, 0, 3, 1 -> /3 - 0.5
    assert np.allclose(centered_ranks(x), [2 / 3 - 0.5, -0.5, 0.5, 1 / 3 - 0.5])


def test_ties_are_broken_by_position():
    assert ranks(np.array([1.0, 1.0, 1.0])).tolist() == [0, 1, 2]
    assert top_k(np.array([5.0, 7.0, 7.0, 1.0]), 3).tolist() == [1, 2, 0]


def test_validate_fitness_shapes():
    assert validate_fitness([1, 2, 3], 3).tolist() == [1.0, 2.0, 3.0]
    assert validate_fitness(np.ones((3, 1)), 3).shape == (3,)
    msg = r"one value per population member \(3\), got shape \(2,\)"
    with pytest.raises(ConfigError, match=msg):
        validate_fitness([1, 2], 3)
    with pytest.raises(ConfigError, match="one value per population member"):
        validate_fitness(np.ones((3, 2)), 3)


def test_nonfinite_policies():
    with pytest.raises(ConfigError, match=r"finite or -inf, got nan at member 1 \(2 bad values\)"):
        validate_fitness([0.0, np.nan, np.inf], 3)
    f = validate_fitness([0.0, np.nan, np.inf, -np.inf], 4, nonfinite="worst")
    assert f.tolist() == [0.0, -np.inf, -np.inf, -np.inf]
    assert validate_fitness([-np.inf, 1.0], 2).tolist() == [-np.inf, 1.0]
