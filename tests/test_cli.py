import subprocess
import sys

import neuroevo


def run(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_console_script_version_and_help():
    out = run("neuroevo", "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"neuroevo {neuroevo.__version__}"
    out = run(sys.executable, "-m", "neuroevo", "--help")
    assert out.returncode == 0 and "usage: neuroevo" in out.stdout and "--version" in out.stdout


def test_unknown_command_exits_2_without_traceback():
    out = run("neuroevo", "fly")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "invalid choice" in out.stderr
