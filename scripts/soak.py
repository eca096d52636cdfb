"""Soak test: run ``neuroevo run`` for N generations and record its memory after each one.

The run is a real CLI process (checkpoints, metrics files, TensorBoard and all); this script
watches it from outside and reads its resident set size (``VmRSS`` in ``/proc/PID/status``)
each time a generation's row lands in ``metrics.jsonl``. After the warm-up (allocator pools,
the parent cache and the noise table settle in the first generations) RSS wanders by a few
percent from one generation to the next as the allocator reuses memory, so three figures are
reported: ``growth_after_warmup`` (last generation against the end of the warm-up, the
noisiest), ``window_growth`` (median of the last ``--window`` generations against the median
of the first ``--window`` after the warm-up) and ``slope_per_generation`` (a least-squares
line through every generation after the warm-up, as a fraction of the baseline: a leak is a
steady positive slope). The same three figures are given under ``peak`` for the most RSS
the run held during each generation (sampled every 10 ms), which catches memory that is
taken during a generation and given back before its row is written.

    python scripts/soak.py --generations 200 -- ga --env CartPole-v1
    python scripts/soak.py --generations 30 --warmup 5 -- ga --game pong --episode-cap 500
    python scripts/soak.py ... --json experiments/bench/soak-cartpole.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from neuroevo.files import atomic_write


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def summarize(rss: list[int], warmup: int, window: int) -> dict:
    """The growth figures of the module docstring for ``rss`` sampled once a generation."""
    after = np.asarray(rss[warmup:], dtype=np.float64)
    if len(after) < 2:
        raise SystemExit(f"soak: only {len(rss)} generations sampled; lower --warmup")
    window = max(1, min(window, len(after) // 2))
    base = rss[warmup - 1] if warmup else rss[0]
    first, last = np.median(after[:window]), np.median(after[-window:])
    slope = np.polyfit(np.arange(len(after)), after, 1)[0]
    return {"warmup": warmup, "window": window, "rss_after_warmup_bytes": base,
            "rss_last_bytes": rss[-1], "rss_peak_bytes": int(after.max()),
            "growth_after_warmup": (rss[-1] - base) / base,
            "window_growth": float((last - first) / first),
            "slope_per_generation": float(slope / first)}


def soak(run_args: list[str], generations: int, warmup: int, window: int,
         poll: float = 0.01) -> dict:
    with tempfile.TemporaryDirectory(prefix="neuroevo-soak-") as tmp:
        run_dir = os.path.join(tmp, "r")
        command = [sys.executable, "-m", "neuroevo", "run", *run_args, "--generations",
                   str(generations), "--run-dir", run_dir, "--no-progress"]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        metrics, rss, peaks, seen, peak = os.path.join(run_dir, "metrics.jsonl"), [], [], 0, 0
        start = time.perf_counter()
        while proc.poll() is None:
            try:
                now = rss_bytes(proc.pid)
                with open(metrics) as f:
                    rows = sum(1 for line in f if line.strip())
            except FileNotFoundError:
                rows = 0
            except (OSError, RuntimeError):
                break  # it ended between the two reads
            peak = max(peak, now)
            if rows > seen:
                rss.append(now)  # the generation just written
                peaks.append(peak)  # the most it held during that generation
                seen, peak = rows, 0
            time.sleep(poll)
        err = proc.communicate()[1]
        if proc.returncode != 0:
            raise SystemExit(f"soak: the run failed ({proc.returncode}): {err.strip()[-500:]}")
    return {"command": command[3:], "generations": generations, "sampled": len(rss),
            "rss_bytes": rss, **summarize(rss, warmup, window), "peak_rss_bytes": peaks,
            "peak": summarize(peaks, warmup, window),
            "wall_s": round(time.perf_counter() - start, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--generations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10,
                   help="generations before the baseline is taken")
    p.add_argument("--window", type=int, default=5,
                   help="generations per median in window_growth")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("run", nargs=argparse.REMAINDER,
                   help="after --: the arguments of 'neuroevo run' (ALGO and flags)")
    args = p.parse_args()
    run_args = args.run[1:] if args.run[:1] == ["--"] else args.run
    if not run_args:
        p.error("give the run after --, e.g. -- ga --env CartPole-v1")
    if args.generations < 1 or not 0 <= args.warmup < args.generations:
        p.error("need --generations >= 1 and 0 <= --warmup < --generations")
    result = soak(run_args, args.generations, args.warmup, args.window)
    mib = 1 << 20
    print(f"soak: {result['sampled']} generations, RSS after warm-up "
          f"{result['rss_after_warmup_bytes'] / mib:,.1f} MiB, last "
          f"{result['rss_last_bytes'] / mib:,.1f} MiB, peak {result['rss_peak_bytes'] / mib:,.1f}"
          f" MiB; growth {100 * result['growth_after_warmup']:+.2f}% (last vs warm-up), "
          f"{100 * result['window_growth']:+.2f}% (medians of {result['window']}), "
          f"{100 * result['slope_per_generation']:+.3f}% per generation (fit); "
          f"{result['wall_s']} s")
    peak = result["peak"]
    print(f"soak: peak RSS within a generation: {100 * peak['growth_after_warmup']:+.2f}% "
          f"(last vs warm-up), {100 * peak['window_growth']:+.2f}% (medians), "
          f"{100 * peak['slope_per_generation']:+.3f}% per generation (fit)")
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
