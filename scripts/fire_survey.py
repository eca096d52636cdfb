"""Which Atari games idle random networks to the training cap, with neither FIRE rule, with
``env.fire_on_life_loss`` and with it and ``env.fire_on_frozen_screen`` (issue 33).

    python scripts/fire_survey.py experiments/fire            # the 57 games, every setting
    python scripts/fire_survey.py /tmp/s --games breakout,pong --members 4

For each game of the common 57-game set, ``--members`` random-init small-net members (the
quick defaults' generation 0 under ``--seed``) play one training episode each, through the
engine as ``neuroevo run`` plays them, to ``--cap`` agent steps, in each setting of
``SETTINGS`` (``off``: neither rule; ``on``: FIRE on life loss; ``both``: that and FIRE after
30 steps of a frozen screen, the quick defaults). A member at the cap with a rule on is
replayed alone (its steps and score must equal
the engine's) to find whether it idles on a screen that no longer changes (``frozen``: the
newest frame did not change in the last ``--frozen`` steps) or plays on without the game
ending. Writes ``OUT/survey.json`` (every member's steps and score, and for those replays
the step the screen last changed) and ``OUT/survey.md`` (one row per game); a second run
does only the games and settings missing from ``survey.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch

from neuroevo.build import build
from neuroevo.config import Config
from neuroevo.engine.slots import episode_seed
from neuroevo.envs.atari import FROZEN_SCREEN_STEPS, fire_action
from neuroevo.evaluation import evaluate_one
from neuroevo.files import atomic_write
from neuroevo.policy.heads import to_actions

ATARI_57 = ("alien", "amidar", "assault", "asterix", "asteroids", "atlantis", "bank_heist",
    "battle_zone", "beam_rider", "berzerk", "bowling", "boxing", "breakout", "centipede",
    "chopper_command", "crazy_climber", "defender", "demon_attack", "double_dunk",
    "enduro", "fishing_derby", "freeway", "frostbite", "gopher", "gravitar", "hero",
    "ice_hockey", "jamesbond", "kangaroo", "krull", "kung_fu_master", "montezuma_revenge",
    "ms_pacman", "name_this_game", "phoenix", "pitfall", "pong", "private_eye", "qbert",
    "riverraid", "road_runner", "robotank", "seaquest", "skiing", "solaris",
    "space_invaders", "star_gunner", "surround", "tennis", "time_pilot", "tutankham",
    "up_n_down", "venture", "video_pinball", "wizard_of_wor", "yars_revenge", "zaxxon")


# setting -> (env.fire_on_life_loss, env.fire_on_frozen_screen)
SETTINGS = {"off": (False, 0), "on": (True, 0), "both": (True, FROZEN_SCREEN_STEPS)}


def members(game: str, setting: str, count: int, cap: int, seed: int) -> list[dict]:
    """One training episode of each of ``count`` random members, through the engine as
    ``neuroevo run`` evaluates them; with a rule on, the members at the cap are replayed one
    by one to find the step their screen last changed."""
    cfg = Config(seed=seed)
    cfg.env.game, cfg.env.episode_cap = game, cap
    cfg.env.fire_on_life_loss, cfg.env.fire_on_frozen_screen = SETTINGS[setting]
    cfg.algo.population, cfg.net.name = count, "small"
    built = build(cfg)
    pop = built.optimizer.ask()  # the quick defaults' generation 0
    try:
        result = evaluate_one(built.evaluator, pop)
    finally:
        built.evaluator.close()
    out = [{"steps": int(n), "score": float(r)}
           for n, r in zip(result.steps, result.fitness, strict=True)]
    capped = [i for i, e in enumerate(out) if e["steps"] >= cap]
    if setting != "off" and capped:
        seeds = [episode_seed(seed, pop.generation, pop.phase, i) for i in capped]
        for i, (n, r, changed) in zip(capped, replay(built, pop.params(indices=capped), seeds,
                                                     cap), strict=True):
            if (n, r) != (out[i]["steps"], out[i]["score"]):
                raise RuntimeError(f"{game} member {i}: the replay differs from the engine")
            out[i]["changed"] = changed
    return out


def replay(built, params: torch.Tensor, seeds: list[int], cap: int) -> list[tuple]:
    """``(steps, score, the step the screen last changed)`` of each member's episode
    (``params [k, D]``, one seed each), played in lock step."""
    k = len(seeds)
    pool = built.env.make_pool(k)
    layers = built.policy.slot_layers(params)
    obs = pool.reset(np.ones(k, bool), seeds)
    steps, score, changed = np.zeros(k, np.int64), np.zeros(k), np.zeros(k, np.int64)
    running = np.ones(k, bool)
    with torch.no_grad():
        while running.any():
            pool.send(to_actions(built.policy.forward(layers, torch.from_numpy(obs)),
                                 built.env.action))
            new, reward, done = pool.recv()
            steps += running
            score += np.where(running, reward, 0.0)
            moved = running & (new[:, -1] != obs[:, -1]).reshape(k, -1).any(1)
            changed[moved] = steps[moved]
            obs = new
            running &= ~done & (steps < cap)
    pool.close()
    return [(int(n), float(r), int(c)) for n, r, c in zip(steps, score, changed, strict=True)]


def row(game: str, result: dict, cap: int, frozen: int) -> str:
    cells = []
    for setting in SETTINGS:
        eps = result.get(setting)
        if eps is None:
            cells += ["", *([""] if setting != "off" else []), "", ""]
            continue
        capped = [e for e in eps if e["steps"] >= cap]
        still = sum(e["steps"] - e["changed"] >= frozen for e in capped if "changed" in e)
        cells += [f"{len(capped)}/{len(eps)}", *([f"{still}"] if setting != "off" else []),
                  f"{np.mean([e['steps'] for e in eps]):,.0f}",
                  f"{np.mean([e['score'] for e in eps]):g}"]
    return f"| {game} | {result['fire']} | " + " | ".join(cells) + " |"


def report(out: str, results: dict, args) -> None:
    head = ("| game | FIRE in its action set | off: at cap | off: mean steps | off: mean score "
            "| on: at cap | on: frozen | on: mean steps | on: mean score | both: at cap | "
            "both: frozen | both: mean steps | both: mean score |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = [row(g, results[g], args.cap, args.frozen) for g in args.games if g in results]

    def total(setting, frozen=False):
        n = 0
        for g in args.games:
            for e in results.get(g, {}).get(setting, []):
                n += e["steps"] >= args.cap and (
                    not frozen or e["steps"] - e.get("changed", e["steps"]) >= args.frozen)
        return n

    members = sum(len(results[g]["off"]) for g in args.games if g in results)
    totals = (f"\nMembers at the cap: {total('off')} of {members} with neither rule (off), "
              f"{total('on')} with FIRE on life loss (on), {total('on', True)} of them on a "
              f"frozen screen; {total('both')} with both rules (both), {total('both', True)} "
              "of them on a frozen screen.\n")
    text = (f"# Random small nets at the {args.cap:,}-step cap: off, FIRE on life loss (on), "
            f"and it with FIRE on frozen screens (both)\n\n"
            f"`python scripts/fire_survey.py` (seed {args.seed}, {args.members} members a game, "
            f"one episode each; frozen: the screen did not change in the last {args.frozen:,} "
            f"steps; {platform.node() or 'this machine'}, "
            f"{time.strftime('%Y-%m-%d')}).\n\n" + head + "\n".join(rows) + "\n" + totals)
    atomic_write(os.path.join(out, "survey.md"), text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="folder for survey.json and survey.md")
    p.add_argument("--games", default=",".join(ATARI_57), help="comma-separated ROM ids")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--cap", type=int, default=5000, help="agent steps (the training cap)")
    p.add_argument("--frozen", type=int, default=1000,
                   help="steps without a screen change that count as frozen")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.games = [g for g in args.games.split(",") if g]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "survey.json")
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    for game in args.games:
        missing = [s for s in SETTINGS if s not in results.get(game, {})]
        if not missing:
            continue
        t0 = time.perf_counter()
        results[game] = {**results.get(game, {}), "fire": fire_action(game) is not None,
                         **{s: members(game, s, args.members, args.cap, args.seed)
                            for s in missing}}
        atomic_write(path, json.dumps(results, indent=1))
        report(args.out, results, args)
        capped = {s: sum(e["steps"] >= args.cap for e in results[game][s]) for s in SETTINGS}
        print(f"{game}: at the cap {capped} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
