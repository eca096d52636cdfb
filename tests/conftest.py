import pytest

from neuroevo.noise import NoiseTable


@pytest.fixture(scope="session")
def noise():
    """A small table keeps tests fast; the code paths are those of the 32M default."""
    return NoiseTable(seed=7, size=1 << 16)
