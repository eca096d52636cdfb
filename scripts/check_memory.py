"""Peak memory of a Deep GA (or OpenAI-ES) run on the CPU: population 1000, the large net.

Run: python scripts/check_memory.py [--population 1000] [--generations 2] [--episode-cap 10]
     python scripts/check_memory.py --algo es --rank 1 --population 10000   # issue 15: < 4 GB
Prints one JSON line: peak RSS, noise table bytes, and the budget (GA: 3 GB plus the table;
ES: 4 GB in all). Short episodes keep it quick; memory does not grow with episode length, it
grows with the population (genomes), the slots (one network each, or with a rank its
factors) and the decoder's parent cache.
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
    ap.add_argument("--algo", default="ga", choices=("ga", "es"))
    ap.add_argument("--rank", type=int, default=0, help="low-rank perturbations (0: full)")
    args = ap.parse_args()
    cfg = Config()
    settings = [("algo.name", args.algo), ("algo.population", args.population),
                ("net.name", "large"), ("env.game", args.game),
                ("env.episode_cap", args.episode_cap), ("engine.device", "cpu")]
    if args.algo == "ga":  # the paper's selection and elite validation
        settings += [("algo.truncation", 20), ("algo.elite_candidates", 10),
                     ("algo.validation_episodes", 30), ("algo.train_episodes", 1)]
    if args.rank:
        settings.append(("algo.rank", args.rank))
    for key, value in settings:
        override(cfg, key, value)
    built = build(cfg)
    rows = list(generations(built.optimizer, built.evaluator, Budget(args.generations),
                            obs_norm=built.obs_norm))
    built.evaluator.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    table = built.optimizer.noise.size * 4
    print(json.dumps({"peak_rss_bytes": peak, "noise_table_bytes": table,
                      "budget_bytes": 3 * 2**30 + table if args.algo == "ga" else 4 * 2**30,
                      "generations": len(rows),
                      "episodes": rows[-1]["episodes"], "num_params": built.policy.num_params}))


if __name__ == "__main__":
    main()
