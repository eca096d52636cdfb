"""Each generation-0 member's training episode against its mean over many (issue 33).

    python scripts/member_means.py                      # breakout's quick defaults, 16 each
    python scripts/member_means.py --episodes 8 --set seed=1

Builds a run as ``neuroevo run`` does (``--set`` items apply), plays one training episode of
each member of generation 0, then ``--episodes`` more of each on fresh validation seeds, and
prints the members by their mean: the single episode that a Deep GA generation ranks on,
the mean, and the scores the member's episodes took. On breakout with sticky actions off a
random small net's episode is fixed by its start state, and its scores take two or three
values (0, 10 or 20; 1 or 11), so one episode ranks the starts more than the networks: the
reason ``algo.train_episodes`` plays two on Atari (``neuroevo.optim.ga``).
"""

from __future__ import annotations

import argparse

import numpy as np

from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.evaluation import evaluate_one
from neuroevo.genomes import Population


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="breakout")
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--top", type=int, default=12, help="members printed, best mean first")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    cfg = Config()
    cfg.env.game, cfg.algo.test_episodes, cfg.algo.train_episodes = args.game, 0, 1
    apply_sets(cfg, args.set)
    built = build(cfg)
    try:
        pop = built.optimizer.ask()
        first = evaluate_one(built.evaluator, pop).fitness
        members = [pop[i] for i in range(len(pop))]
        again = Population([g for g in members for _ in range(args.episodes)], 0, "validate",
                           built.optimizer.decoder)
        scores = evaluate_one(built.evaluator, again).fitness.reshape(len(members), -1)
    finally:
        built.evaluator.close()
    means = scores.mean(axis=1)
    print(f"{len(members)} members of generation 0, {args.episodes} more episodes each: mean "
          f"of the training episodes {first.mean():.2f}, of the others {means.mean():.2f}; "
          f"correlation of the two {np.corrcoef(first, means)[0, 1]:.2f}")
    print("member  training episode  mean of the others  scores (count)")
    for i in np.argsort(-means, kind="stable")[: args.top]:
        values, counts = np.unique(scores[i], return_counts=True)
        taken = ", ".join(f"{v:g} ({c})" for v, c in zip(values, counts, strict=True))
        print(f"{i:6d}  {first[i]:16g}  {means[i]:18.2f}  {taken}")


if __name__ == "__main__":
    main()
