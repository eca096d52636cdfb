"""Does one FIRE unfreeze a survey member's frozen screen? (issue 33)

    python scripts/fire_probe.py experiments/fire bowling gopher riverraid

For each game, replays the first member that ``scripts/fire_survey.py`` found at the cap on
a frozen screen (FIRE on life loss on), presses FIRE once at step ``--at`` in place of its
action, and prints whether the newest frame changes around that step and the lives ale-py
reports: a screen that moves only after the FIRE waits for it, and lives that drop only
after it show why FIRE on life loss never fired there.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.config import Config
from neuroevo.engine.slots import episode_seed
from neuroevo.envs.atari import fire_action
from neuroevo.policy.heads import to_actions

SHOWN = (-10, -1, 0, 1, 5, 20, 100, 300)  # steps around the FIRE that are printed


def probe(game: str, survey: dict, at: int, frozen: int) -> None:
    eps = survey[game]["on"]
    idx = next(i for i, e in enumerate(eps) if e["steps"] - e.get("changed", e["steps"]) >= frozen)
    cfg = Config()
    cfg.env.game, cfg.algo.population, cfg.net.name = game, len(eps), "small"
    built = build(cfg)
    built.evaluator.close()
    pop = built.optimizer.ask()
    pool = built.env.make_pool(1, 1)
    layers = built.policy.slot_layers(pop.params(indices=[idx]))
    obs = pool.reset(np.ones(1, bool), [episode_seed(cfg.seed, 0, "train", idx)])
    print(f"{game}, member {idx}:")
    with torch.no_grad():
        for t in range(at + max(SHOWN) + 1):
            action = to_actions(built.policy.forward(layers, torch.from_numpy(obs)),
                                built.env.action)
            if t == at:
                action[:] = fire_action(game)
            pool.send(action)
            new, _, done = pool.recv()
            if t - at in SHOWN:
                moved = "moves " if not np.array_equal(new[0, -1], obs[0, -1]) else "frozen"
                print(f"  step {t:5d} (FIRE {t - at:+d}): {moved}  lives {pool.lives[0]}"
                      f"  action {action[0]}")
            obs = new
            if done[0]:
                print(f"  the episode ended at step {t}")
                break
    pool.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("survey", help="the folder of fire_survey.py's survey.json")
    p.add_argument("games", nargs="+")
    p.add_argument("--at", type=int, default=2000, help="the step FIRE is pressed at")
    p.add_argument("--frozen", type=int, default=1000)
    args = p.parse_args()
    with open(os.path.join(args.survey, "survey.json")) as f:
        survey = json.load(f)
    for game in args.games:
        probe(game, survey, args.at, args.frozen)


if __name__ == "__main__":
    main()
