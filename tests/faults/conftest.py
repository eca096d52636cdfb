import pytest
from faultkit import CARTPOLE, neuroevo


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory):
    """``run(n)``: a CartPole GA run directory of ``n`` generations that nothing interrupted,
    made once per session (tests copy it before they change anything)."""
    made = {}

    def run(generations: int):
        if generations not in made:
            cwd = tmp_path_factory.mktemp(f"gens{generations}")
            out = neuroevo("run", "ga", *CARTPOLE, "--generations", str(generations),
                           "--run-dir", "r", cwd=cwd)
            assert out.returncode == 0, out.stderr
            made[generations] = cwd / "r"
        return made[generations]

    return run


@pytest.fixture(scope="session")
def straight(cartpole_run):
    """5 generations: what an interrupted and resumed run must equal."""
    return cartpole_run(5)


@pytest.fixture(scope="session")
def two(cartpole_run):
    return cartpole_run(2)


@pytest.fixture(scope="session")
def one(cartpole_run):
    return cartpole_run(1)
