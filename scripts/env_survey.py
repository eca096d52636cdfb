"""Every env id a user can type, through ``neuroevo run`` (issue 36): each one ran, was
refused in one line (exit 2, no traceback), or failed. Zero may fail.

    python scripts/env_survey.py experiments/envs --label extras   # in a venv with .[box2d,jax]
    python scripts/env_survey.py experiments/envs --label bare     # pip install -e . only
    python scripts/env_survey.py OUT --ids CartPole-v1,ALE/Pong-v5  # a sample (the CI test)
    python scripts/env_survey.py experiments/envs --label bare --ids Pusher-v4 --update

The ids: every id in gymnasium's registry that is not ale-py's, and ale-py's ``ALE/<Game>-v5``
for each of its ROMs, with breakout's four older ids (v0, v4, NoFrameskip-v0, -v4); the ROMs
ale-py registers no id for (multiplayer games) as ``game:<rom>``, run with ``--game``. Each
runs in its own process as ``neuroevo run ga --env ID --population 4 --generations 1``, with
a 100-step episode cap and one validation and one test episode, so that a pixel-heavy env
(CarRacing) finishes in seconds; a run that passes ``--timeout`` counts as failed. Writes
``OUT/survey-LABEL.json`` (every id's outcome and line) and ``OUT/survey-LABEL.md`` (the
totals, the refusals grouped by reason, every failure). ``--update`` surveys ``--ids`` again
and replaces their rows in an existing ``survey-LABEL.json`` (after a fix to those ids).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

FLAGS = ["--population", "4", "--generations", "1", "--episode-cap", "100", "--device", "cpu",
         "--no-progress", "--set", "algo.elite_candidates=1",
         "--set", "algo.validation_episodes=1", "--set", "algo.test_episodes=1",
         "--set", "env.test_episode_cap=100"]
OLDER = ("Breakout-v0", "Breakout-v4", "BreakoutNoFrameskip-v0", "BreakoutNoFrameskip-v4")


def all_ids() -> list[str]:
    import ale_py
    import ale_py.roms
    import gymnasium

    gymnasium.register_envs(ale_py)
    registry = gymnasium.envs.registry
    ale = {k for k, s in registry.items() if str(s.entry_point).startswith("ale_py")}
    v5 = sorted(k for k in ale if k.startswith("ALE/") and k.endswith("-v5"))
    named = {registry[k].kwargs["game"] for k in v5}
    bare = [f"game:{g}" for g in sorted(set(ale_py.roms.get_all_rom_ids()) - named)]
    return sorted(set(registry) - ale) + v5 + bare + [k for k in OLDER if k in ale]


def outcome(env_id: str, timeout: float) -> dict:
    """One id through a real ``neuroevo run``: ``{id, outcome, line, seconds}``."""
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        try:
            which = (["--game", env_id[5:]] if env_id.startswith("game:")
                     else ["--env", env_id])
            out = subprocess.run([sys.executable, "-m", "neuroevo", "run", "ga", *which,
                                  *FLAGS, "--run-dir", "r"], capture_output=True, text=True,
                                 cwd=cwd, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"id": env_id, "outcome": "failed", "line": f"still running after "
                    f"{timeout:g} s", "seconds": timeout}
        seconds = round(time.perf_counter() - start, 1)
        err = [line for line in out.stderr.strip().splitlines() if not _warning(line)]
        if out.returncode == 0:
            return {"id": env_id, "outcome": "ran", "line": "", "seconds": seconds}
        one_line = (out.returncode == 2 and len(err) == 1 and "Traceback" not in out.stderr)
        return {"id": env_id, "outcome": "refused" if one_line else "failed",
                "line": err[-1] if err else f"exit {out.returncode}", "seconds": seconds}


def _warning(line: str) -> bool:
    """Library warnings on stderr (gymnasium's deprecations), not neuroevo's output."""
    return bool(re.search(r"Warning|WARN|logger\.|warnings\.warn", line)) or line.startswith(" ")


def report(results: list[dict], label: str) -> str:
    counts = collections.Counter(r["outcome"] for r in results)
    lines = [f"# Env survey ({label})", "",
             f"{len(results)} ids: {counts['ran']} ran, {counts['refused']} refused in one "
             f"line, {counts['failed']} failed. `python scripts/env_survey.py` with "
             f"`neuroevo run ga --env ID {' '.join(FLAGS[:4])}` and a 100-step cap.", "",
             "## Refused, by reason", "", "| ids | line |", "|---|---|"]
    reasons = collections.defaultdict(list)
    for r in results:
        if r["outcome"] == "refused":
            name = r["id"].removeprefix("game:")
            reasons[r["line"].replace(f"'{name}'", "ID").replace(name, "ID")].append(r["id"])
    for line, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        shown = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
        lines.append(f"| {shown} | {line.replace('|', '/')} |")
    lines += ["", "## Failed", ""]
    lines += [f"- {r['id']}: {r['line']}" for r in results if r["outcome"] == "failed"] or [
        "none"]
    lines += ["", "## Ran", "", ", ".join(r["id"] for r in results if r["outcome"] == "ran")]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--label", default="sample", help="names the output files")
    ap.add_argument("--ids", default="", help="comma-separated ids (default: all_ids())")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per id")
    ap.add_argument("--update", action="store_true",
                    help="replace the rows of --ids in OUT/survey-LABEL.json")
    args = ap.parse_args(argv)
    ids = args.ids.split(",") if args.ids else all_ids()
    path = os.path.join(args.out, f"survey-{args.label}.json")
    fresh = {}
    for k, env_id in enumerate(ids):
        r = fresh[env_id] = outcome(env_id, args.timeout)
        print(f"[{k + 1}/{len(ids)}] {env_id}: {r['outcome']} ({r['seconds']} s) {r['line']}",
              flush=True)
    results = list(fresh.values())
    if args.update:
        with open(path) as f:
            results = [fresh.get(r["id"], r) for r in json.load(f)["results"]]
    os.makedirs(args.out, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"label": args.label, "flags": FLAGS, "results": results}, f, indent=1)
    with open(os.path.join(args.out, f"survey-{args.label}.md"), "w") as f:
        f.write(report(results, args.label))
    return int(any(r["outcome"] == "failed" for r in results))


if __name__ == "__main__":
    sys.exit(main())
