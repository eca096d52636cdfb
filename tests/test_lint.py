"""The code's shape is part of the test suite: ruff and the import layers of setup.cfg."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["ruff", "check", "."], ["lint-imports"]])
def test_clean(command):
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is not installed; run pip install -e '.[test]'")
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
