"""Writes cannot be redirected or torn: symlinks, full disks, failed writes, stale files."""

import errno
import os
import shutil
import subprocess

import pytest
from faultkit import CARTPOLE, neuroevo, one_line_error, rows

from neuroevo import cli, files


def copy_run(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.mark.parametrize("name", ["metrics.csv", "metrics.csv.tmp", "elite.json",
                                  "checkpoint/state.safetensors.tmp"])
def test_a_planted_symlink_is_never_written_through(tmp_path, two, straight, name):
    run = copy_run(two, tmp_path / "r")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = run / name
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    out = neuroevo("resume", "r", "--generations", "5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert victim.read_text() == "precious"
    assert rows(run) == rows(straight)
    if not name.endswith(".tmp"):  # the link was replaced by the file, not followed
        assert not link.is_symlink() and link.is_file()


@pytest.mark.parametrize("name", ["checkpoint", "tensorboard"])
def test_a_symlinked_directory_in_a_run_is_refused(tmp_path, two, name):
    run = copy_run(two, tmp_path / "r")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(run / name, elsewhere)
    (run / name).symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    one_line_error(neuroevo("resume", "r", "--generations", "3", cwd=tmp_path),
                   f"r/{name} is a symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == before


def _fill(path):
    """Write ``path`` until the file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _temporaries(run):
    return [p for p in run.rglob("*") if files.is_temporary(p.name)]


@pytest.mark.slow
def test_a_full_disk_is_one_line_keeps_the_checkpoint_and_resumes(tmp_path, straight):
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                           capture_output=True)
    if mount.returncode != 0:
        pytest.skip("cannot mount a tmpfs here; test_a_failed_write_... injects the error")
    try:
        out = neuroevo("run", "ga", *CARTPOLE, "--generations", "2", "--run-dir", "r", cwd=disk)
        assert out.returncode == 0, out.stderr
        state = (disk / "r" / "checkpoint" / "state.safetensors").read_bytes()
        _fill(disk / "filler")
        line = one_line_error(neuroevo("resume", "r", "--generations", "5", cwd=disk),
                              "No space left on device", "free there")
        assert "r/" in line
        assert (disk / "r" / "checkpoint" / "state.safetensors").read_bytes() == state
        assert not _temporaries(disk / "r")
        os.remove(disk / "filler")
        out = neuroevo("resume", "r", "--generations", "5", cwd=disk)
        assert out.returncode == 0, out.stderr
        assert rows(disk / "r") == rows(straight)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_failed_write_mid_run_keeps_the_checkpoint_and_resumes(tmp_path, two,
                                                                 straight, monkeypatch, capsys):
    run = copy_run(two, tmp_path / "r")
    state = (run / "checkpoint" / "state.safetensors").read_bytes()
    real_fsync = os.fsync

    def full(fd):  # the disk fills up while generation 2 runs: its checkpoint cannot land
        if "/checkpoint/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "fsync", full)
    assert cli.main(["resume", "r", "--generations", "5", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "free there" in err[0]
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert (run / "checkpoint" / "state.safetensors").read_bytes() == state
    assert not _temporaries(run)
    assert cli.main(["resume", "r", "--generations", "5", "--no-progress"]) == 0
    assert rows(run) == rows(straight)


def test_stale_temporary_files_are_removed_on_resume(tmp_path, two):
    run = copy_run(two, tmp_path / "r")
    stale = run / "checkpoint" / f"{files.TMP_PREFIX}killed.tmp"  # what kill -9 can leave
    stale.write_bytes(b"half a checkpoint")
    assert neuroevo("resume", "r", "--generations", "3", cwd=tmp_path).returncode == 0
    assert not _temporaries(run)


def test_an_unwritable_or_file_run_dir_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    one_line_error(neuroevo("run", "ga", *CARTPOLE, "--generations", "1", "--run-dir", "afile",
                            cwd=tmp_path), "afile is a file")
    assert (tmp_path / "afile").read_text() == "not a directory"
    ro = tmp_path / "ro"
    ro.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(ro)],
                           capture_output=True)
    target = "ro/r" if mount.returncode == 0 else "/proc/neuroevo-run"
    try:
        one_line_error(neuroevo("run", "ga", *CARTPOLE, "--generations", "1", "--run-dir",
                                target, cwd=tmp_path), "cannot", "free there")
    finally:
        if mount.returncode == 0:
            subprocess.run(["umount", "-l", str(ro)], check=False)


def test_metrics_are_strict_json_with_null_for_nan_and_inf(tmp_path):
    import json

    from neuroevo.checkpoint import RunDir

    run = RunDir(str(tmp_path))
    run.write_metrics([{"generation": 0, "frames": 10, "fitness_max": float("nan"),
                        "fitness_mean": float("-inf"), "timings": {"env_wait": float("inf")},
                        "elite_score": 3.5}])

    def strict(name):
        raise ValueError(f"non-standard JSON constant {name}")

    row = json.loads((tmp_path / "metrics.jsonl").read_text(), parse_constant=strict)
    assert row["fitness_max"] is None and row["fitness_mean"] is None
    assert row["timings"] == {"env_wait": None} and row["elite_score"] == 3.5
    assert (tmp_path / "metrics.csv").read_text().splitlines()[1].startswith("0,10,,,")


def test_plot_skips_a_torn_last_line_with_a_warning(tmp_path, two):
    run = copy_run(two, tmp_path / "r")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"generation": 2, "frames": 12')  # a copy taken mid-write
    out = neuroevo("plot", "r", "-o", "c.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "warning" in out.stderr and "torn last line" in out.stderr
    assert (tmp_path / "c.png").stat().st_size > 0
    (run / "metrics.jsonl").write_text('{"generation": 0}\nnot json\n{"generation": 1}\n')
    one_line_error(neuroevo("plot", "r", "-o", "c.png", cwd=tmp_path), "line 2 is not")
