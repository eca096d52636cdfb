"""Hostile run-directory files (issue 36): nesting too deep to parse, and files that are
not regular files (a FIFO, a directory, a device), are each refused in one line, exit 2,
by every command that reads them: nothing hangs, nothing is lost. FIFO cases run in a real
process with a timeout, so a read that blocks fails the test instead of hanging it."""

import os
import shutil

import pytest
from faultkit import neuroevo, one_line_error

from neuroevo import cli

DEEP_YAML = "algo: " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _main(argv, cwd, monkeypatch, capsys):
    monkeypatch.chdir(cwd)
    code = cli.main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_deep_config_file_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "deep.yaml").write_text(DEEP_YAML)
    code, err = _main(["run", "ga", "--config", "deep.yaml"], tmp_path, monkeypatch, capsys)
    assert code == 2 and err == ["neuroevo: error: config file deep.yaml is not valid YAML "
                                 "(nested too deeply to read)"]


@pytest.mark.parametrize("command", [["resume", "r", "--generations", "2"], ["play", "r"]])
def test_a_deep_config_yaml_in_a_run_is_one_line(tmp_path, one, monkeypatch, capsys, command):
    shutil.copytree(one, tmp_path / "r")
    (tmp_path / "r" / "config.yaml").write_text(DEEP_YAML)
    before = (tmp_path / "r" / "metrics.jsonl").read_bytes()
    code, err = _main(command, tmp_path, monkeypatch, capsys)
    assert code == 2 and len(err) == 1, err
    assert "r/config.yaml is missing or corrupt (nested too deeply to read)" in err[0]
    assert (tmp_path / "r" / "metrics.jsonl").read_bytes() == before  # nothing lost


def test_deep_metrics_are_one_line_and_deep_genomes_a_config_error(tmp_path, one, monkeypatch,
                                                                     capsys):
    from neuroevo.errors import ConfigError
    from neuroevo.genomes import SeedChain

    shutil.copytree(one, tmp_path / "r")
    (tmp_path / "r" / "metrics.jsonl").write_text(DEEP_JSON + "\n")
    code, err = _main(["plot", "r", "-o", "c.png"], tmp_path, monkeypatch, capsys)
    assert code == 2 and len(err) == 1 and "line 1 is not a metrics row (nested too " in err[0]
    with pytest.raises(ConfigError, match=r"not a neuroevo\.seedchain/1 genome document "
                                          r"\(nested too deeply to read\)"):
        SeedChain.from_json(DEEP_JSON)


def test_a_deep_run_json_is_started_again_on_resume(tmp_path, one, monkeypatch, capsys):
    """run.json informs (the layout each session chose); nothing is loaded from it, so an
    unreadable one is replaced, as a corrupt one always was."""
    shutil.copytree(one, tmp_path / "r")
    (tmp_path / "r" / "run.json").write_text(DEEP_JSON)
    code, _ = _main(["resume", "r", "--generations", "2"], tmp_path, monkeypatch, capsys)
    import json

    sessions = json.loads((tmp_path / "r" / "run.json").read_text())["sessions"]
    assert code == 0 and [s["from_generation"] for s in sessions] == [1]


def _plant(path, kind):
    os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        os.symlink("/dev/zero", path)


WHAT = {"fifo": "a FIFO, not a regular file", "directory": "a directory, not a regular file",
        "device": "a character device, not a regular file"}
CASES = [("metrics.jsonl", ["plot", "r", "-o", "c.png"], "fifo"),
         ("metrics.jsonl", ["plot", "r", "-o", "c.png"], "device"),
         ("config.yaml", ["resume", "r", "--generations", "2"], "fifo"),
         ("config.yaml", ["play", "r"], "directory"),
         ("checkpoint/state.safetensors", ["resume", "r", "--generations", "2"], "fifo"),
         ("checkpoint/state.safetensors", ["play", "r"], "device")]


@pytest.mark.parametrize("name,command,kind", CASES, ids=[f"{c[1][0]}-{c[0]}-{c[2]}"
                                                         for c in CASES])
def test_a_file_that_is_not_regular_is_refused_without_reading_it(tmp_path, one, name,
                                                                   command, kind):
    shutil.copytree(one, tmp_path / "r")
    _plant(tmp_path / "r" / name, kind)
    before = (tmp_path / "r" / "elite.json").read_bytes()
    one_line_error(neuroevo(*command, cwd=tmp_path, timeout=120), f"r/{name}", WHAT[kind])
    assert (tmp_path / "r" / "elite.json").read_bytes() == before


def test_a_fifo_run_json_is_replaced_not_read(tmp_path, one):
    shutil.copytree(one, tmp_path / "r")
    _plant(tmp_path / "r" / "run.json", "fifo")
    out = neuroevo("resume", "r", "--generations", "2", "--no-progress", cwd=tmp_path,
                   timeout=120)
    assert out.returncode == 0, out.stderr
    assert os.path.isfile(tmp_path / "r" / "run.json")


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_load_policy_names_the_policy_file_and_the_fix(tmp_path, one, kind):
    from neuroevo.errors import CheckpointError
    from neuroevo.policy.export import load_policy

    shutil.copy(one / "policy.safetensors", tmp_path / "p.safetensors")
    _plant(tmp_path / "p.safetensors", kind)
    with pytest.raises(CheckpointError) as e:
        load_policy(str(tmp_path / "p.safetensors"))
    assert str(e.value) == (f"{tmp_path}/p.safetensors is not a neuroevo policy file "
                            f"({WHAT[kind]}); copy policy.safetensors again from the run "
                            "directory that wrote it, or play that run with 'neuroevo play "
                            "RUN_DIR', which reads its checkpoint")
    (tmp_path / "state.safetensors").write_bytes((one / "checkpoint" /
                                                  "state.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match=r"state.safetensors has format 'neuroevo\."
                                              r"checkpoint/\d+', not 'neuroevo.policy/\d+', "
                                              r"so it is not a neuroevo policy file; copy"):
        load_policy(str(tmp_path / "state.safetensors"))
