import pytest
from faultkit import CARTPOLE, neuroevo


@pytest.fixture(scope="session")
def straight(tmp_path_factory):
    """A CartPole GA run of 5 generations that nothing interrupted."""
    cwd = tmp_path_factory.mktemp("straight")
    out = neuroevo("run", "ga", *CARTPOLE, "--generations", "5", "--run-dir", "r", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return cwd / "r"
