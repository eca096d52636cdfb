"""The code's shape is part of the test suite: ruff and the import layers of setup.cfg."""

import ast
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["ruff", "check", "."], ["lint-imports"]])
def test_clean(command):
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is not installed; run pip install -e '.[test]'")
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def is_pickle(path: pathlib.Path) -> bool:
    """A raw pickle (protocol 2+) or a torch.save archive (a zip holding ``*.pkl``). A
    safetensors file (an 8-byte little-endian header length, then its JSON) is not one,
    though its length can begin with the same two bytes (0x380: 80 03)."""
    with open(path, "rb") as f:
        head = f.read(9)
    header = int.from_bytes(head[:8], "little")
    if head[8:9] == b"{" and 8 + header <= path.stat().st_size:
        return False
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    if head[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z:
            return any(name.endswith(".pkl") for name in z.namelist())
    return False


def test_the_pickle_detector_finds_pickles(tmp_path):
    import pickle

    import torch

    torch.save({"w": torch.zeros(2)}, tmp_path / "a.pt")
    (tmp_path / "b.bin").write_bytes(pickle.dumps([1, 2]))
    (tmp_path / "c.txt").write_text("params: 1\n")
    assert is_pickle(tmp_path / "a.pt") and is_pickle(tmp_path / "b.bin")
    assert not is_pickle(tmp_path / "c.txt")
    from safetensors.torch import save

    padded = save({"w": torch.zeros(2)}, metadata={"pad": "x" * 810})
    assert padded[:2] == b"\x80\x03"  # a header of 0x380 bytes: pickle's first two bytes
    (tmp_path / "d.safetensors").write_bytes(padded)
    assert not is_pickle(tmp_path / "d.safetensors")


def test_no_pickles_in_the_repository():
    """experiments/ keeps run records a reader can open safely: no file in the tree unpickles."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    found = [f for f in files if f and (ROOT / f).is_file() and is_pickle(ROOT / f)]
    assert not found, f"pickled files in the repository: {found}"


def imports_of(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}


def test_kernels_import_only_torch_triton_and_neuroevo_errors():
    """kernels/ (``neuroevo.kernels`` through package_dir) sits outside what import-linter
    sees; it must stay a leaf that the policies can import."""
    allowed = ("torch", "triton", "neuroevo.errors", "neuroevo.kernels", "numpy")
    for path in (ROOT / "kernels").glob("*.py"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert name.startswith(allowed) or top in sys.stdlib_module_names, (path, name)


def test_engine_and_policy_never_read_the_environment():
    """Kernel choice and every other setting reach them as values, resolved when a run is
    built, so a run cannot change behaviour halfway because a variable changed."""
    for folder in ("engine", "policy"):
        for path in (ROOT / "neuroevo" / folder).glob("*.py"):
            text = path.read_text()
            assert "environ" not in text and "getenv" not in text, path


def test_no_assert_hides_its_check_in_the_message():
    """``assert a, msg and b`` never checks ``b``: a message that is a comparison or a boolean
    expression is a check written in the wrong place."""
    found = []
    for path in sorted(ROOT.glob("tests/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assert) and isinstance(node.msg, (ast.BoolOp, ast.Compare)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_no_function_in_the_package_is_over_80_lines():
    """Small functions (STYLE.md): one over 80 lines is split into named steps."""
    long = []
    for path in sorted((ROOT / "neuroevo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert long == []
