"""scripts/soak.py: the growth figures by hand, and a short real soak."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"
sys.path.insert(0, str(SCRIPT.parent))
from soak import summarize  # noqa: E402


def test_summarize_by_hand():
    rss = [50, 90, 100, 100, 104, 100, 110, 112]  # warm-up 2: baseline 90, then 6 samples
    r = summarize(rss, warmup=2, window=2)
    assert r["rss_after_warmup_bytes"] == 90 and r["rss_peak_bytes"] == 112
    assert r["growth_after_warmup"] == pytest.approx((112 - 90) / 90)
    assert r["window_growth"] == pytest.approx((111 - 100) / 100)  # medians of 2 and 2
    # least squares through (0,100) (1,100) (2,104) (3,100) (4,110) (5,112):
    # Sxy = 43, Sxx = 17.5
    assert r["slope_per_generation"] == pytest.approx(43 / 17.5 / 100)


@pytest.mark.slow
def test_a_short_soak_samples_every_generation(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--generations", "6", "--warmup", "2",
                          "--json", str(tmp_path / "s.json"), "--", "ga", "--env",
                          "CartPole-v1", "--population", "8", "--set", "net.hidden=8"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "s.json").read_text())
    assert r["generations"] == 6 and 1 <= r["sampled"] <= 6
    assert all(x > 10 << 20 for x in r["rss_bytes"])  # a python + torch process
    assert len(r["peak_rss_bytes"]) == r["sampled"]
    assert all(p >= x for p, x in zip(r["peak_rss_bytes"], r["rss_bytes"], strict=True))
    assert r["peak"]["rss_peak_bytes"] == max(r["peak_rss_bytes"][2:])
    assert "per generation (fit)" in out.stdout


FRAGMENT = """
import sys
from neuroevo.memory import release_free_memory
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
# 64 KiB blocks come from the heap (below glibc's mmap threshold); one in 16 is kept, so the
# freed ones sit between live blocks and cannot be returned by shrinking the heap's top.
blocks = [bytes(64 << 10) for _ in range(4096)]
keep = blocks[::16]
del blocks
freed = rss()
released = release_free_memory()
print(freed, rss(), released)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_heap_pages_go_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", FRAGMENT], capture_output=True, text=True,
                         timeout=60, check=True)
    freed, after, released = out.stdout.split()
    # 240 MiB freed but resident before the trim; most of it handed back after
    assert released == "True"
    assert int(freed) - int(after) > 150 << 10, out.stdout
