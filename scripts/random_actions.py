"""How often each random network of a run's generation 0 takes each action (issue 33).

    python scripts/random_actions.py                       # the quick defaults on breakout
    python scripts/random_actions.py --set net.vbn=true    # the same nets with VBN

Plays one training episode (to ``--steps``) of each of ``--members`` members of generation
0, as ``neuroevo run`` builds them from the config (``--set`` items apply), and prints each
member's action counts and the spread of its logits (max - min) at step 100. Random small
nets without VBN are nearly constant-action policies: the static screen dominates their
features, so their logits barely move with the ball.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.engine.slots import episode_seed
from neuroevo.policy.heads import to_actions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="breakout")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    cfg = Config()
    cfg.env.game, cfg.algo.population = args.game, args.members
    apply_sets(cfg, args.set)
    built = build(cfg)
    built.evaluator.close()
    pop, k = built.optimizer.ask(), args.members
    pool = built.env.make_pool(k)
    layers = built.policy.slot_layers(pop.params())
    obs = pool.reset(np.ones(k, bool), [episode_seed(cfg.seed, 0, "train", i) for i in range(k)])
    counts = np.zeros((k, built.env.action.n), np.int64)
    running, spread = np.ones(k, bool), None
    with torch.no_grad():
        for step in range(args.steps):
            out = built.policy.forward(layers, torch.from_numpy(obs))
            actions = to_actions(out, built.env.action)
            counts[running, actions[running]] += 1
            if step == 100:
                spread = (out.max(1).values - out.min(1).values).numpy()
            pool.send(actions)
            obs, _, done = pool.recv()
            running &= ~done
            if not running.any():
                break
    pool.close()
    for i in range(k):
        top = counts[i].max() / max(counts[i].sum(), 1)
        logits = "" if spread is None else f"  logit spread at step 100 {spread[i]:.4f}"
        print(f"member {i}: actions {counts[i].tolist()}  most common {top:.0%}{logits}")


if __name__ == "__main__":
    main()
