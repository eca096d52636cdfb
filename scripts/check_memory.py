"""Peak memory of a Deep GA run on the CPU: population 1000, the large net.

Run: python scripts/check_memory.py [--population 1000] [--generations 2] [--episode-cap 10]
Prints one JSON line: peak RSS, noise table bytes, and the budget (3 GB plus the table).
Short episodes keep it quick; memory does not grow with episode length, it grows with the
population (genomes), the slots (one network each) and the decoder's parent cache.
"""

from __future__ import annotations

import argparse
import json
import resource

from neuroevo.build import build
from neuroevo.config import Config, override
from neuroevo.loop import Budget, generations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=1000)
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--episode-cap", type=int, default=10)
    ap.add_argument("--game", default="frostbite")
    args = ap.parse_args()
    cfg = Config()
    for key, value in (("algo.population", args.population), ("algo.truncation", 20),
                       ("algo.elite_candidates", 10), ("algo.validation_episodes", 30),
                       ("net.name", "large"), ("env.game", args.game),
                       ("env.episode_cap", args.episode_cap), ("engine.device", "cpu")):
        override(cfg, key, value)
    built = build(cfg)
    rows = list(generations(built.optimizer, built.evaluator, Budget(args.generations)))
    built.evaluator.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    table = built.optimizer.noise.size * 4
    print(json.dumps({"peak_rss_bytes": peak, "noise_table_bytes": table,
                      "budget_bytes": 3 * 2**30 + table, "generations": len(rows),
                      "episodes": rows[-1]["episodes"], "num_params": built.policy.num_params}))


if __name__ == "__main__":
    main()
