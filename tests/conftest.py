import os

# Two xdist workers share two cores: OpenMP threads that spin while they wait for work take
# the other worker's core (a naive-loop test ran 84 s beside the memory test, 40 s with
# passive waits, 23 s alone). Set before torch loads its OpenMP runtime; subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
import torch

from neuroevo.noise import NoiseTable

if not torch.cuda.is_available():
    # Triton kernels run on CPU tensors through Triton's interpreter; the switch is read
    # when triton is first imported, so it is set before any test imports it.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per CPU this process may use, at most 4 (each test may run two
    threads of its own)."""
    return min(len(os.sched_getaffinity(0)), 4)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``fuzz`` run only when ``-m`` names them. Groups for ``--dist loadgroup``: a file's tests run on one worker (they share its
    module fixtures), and so do all tests marked ``ray``, one at a time: they count the
    processes of their own local cluster, which another cluster's would confuse."""
    fuzz = "fuzz" in (config.option.markexpr or "")
    for item in items:
        if item.get_closest_marker("fuzz") and not fuzz:
            item.add_marker(pytest.mark.skip(reason="many Hypothesis examples: -m fuzz"))
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def noise():
    """A small table keeps tests fast; the code paths are those of the 32M default."""
    return NoiseTable(seed=7, size=1 << 16)
