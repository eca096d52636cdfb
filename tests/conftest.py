import os

import pytest
import torch

from neuroevo.noise import NoiseTable

if not torch.cuda.is_available():
    # Triton kernels run on CPU tensors through Triton's interpreter; the switch is read
    # when triton is first imported, so it is set before any test imports it.
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def noise():
    """A small table keeps tests fast; the code paths are those of the 32M default."""
    return NoiseTable(seed=7, size=1 << 16)
