"""PGPE and sep-CMA-ES against their references on benchmark functions, side by side.

    python scripts/compare_references.py run neuroevo OUT            # in neuroevo's venv
    REF/bin/python scripts/compare_references.py run evotorch OUT    # evotorch==0.6.1
    REF/bin/python scripts/compare_references.py run pycma OUT       # cma 4.x
    python scripts/compare_references.py table OUT                   # OUT/references.md

The references are not test dependencies: install them in a venv of their own
(``pip install torch==2.13.0 evotorch==0.6.1 "cma>=4,<5"``). Each implementation runs every
(method, function) pair for 10 seeds from the same start with the same settings and
records the evaluations its centre (PGPE: the centre; sep-CMA-ES: the mean) needs to reach
the target, checked after every generation (centre evaluations not counted), or none within
the budget. PGPE is compared with EvoTorch 0.6.1's ``PGPE`` (ClipUp, centred ranks,
symmetric): one algorithm, so the two distributions should agree. sep-CMA-ES (Ros & Hansen
2008) is compared with pycma's ``CMA_diagonal=True``, which is a different diagonal update
(multiplicative, with negative weights): the table says how far apart they are.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

D = 100
SEEDS = range(10)
SHIFT = 0.5  # every coordinate's optimum; the start is 0


def rotation(dims: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(2008).standard_normal((dims, dims)))
    return q


R = rotation(D)
ELLIPSOID = 10 ** np.linspace(0, 6, D)  # condition 1e6, axis-parallel (separable)
ROTATED = 10 ** np.linspace(0, 2, D)  # condition 1e2, rotated: no diagonal fits it
FUNCTIONS = {  # losses of a [P, D] float64 batch, minimum 0 at SHIFT
    "sphere": lambda x: ((x - SHIFT) ** 2).sum(-1),
    "ellipsoid": lambda x: (ELLIPSOID * (x - SHIFT) ** 2).sum(-1),
    "rotated_ellipsoid": lambda x: (ROTATED * ((x - SHIFT) @ R.T) ** 2).sum(-1),
}
# (method, function): target loss, evaluation budget, settings shared by both implementations
PGPE = dict(popsize=100, center_lr=0.05, max_speed=0.1, radius=1.5, stdev_lr=0.1,
            stdev_max_change=0.2, momentum=0.9)
SEPCMA = dict(popsize=4 + int(3 * math.log(D)), sigma=0.3)
CASES = {("pgpe", "sphere"): (0.25, 200_000, PGPE),  # 1% of the start's loss
         ("pgpe", "ellipsoid"): (100.0, 200_000, PGPE),  # 5e-5 of the start's
         ("pgpe", "rotated_ellipsoid"): (5.0, 200_000, PGPE),  # 1% of the start's
         ("sepcma", "sphere"): (1e-8, 200_000, SEPCMA),
         ("sepcma", "ellipsoid"): (1e-8, 200_000, SEPCMA),
         ("sepcma", "rotated_ellipsoid"): (1e-8, 200_000, SEPCMA)}
IMPLS = {"neuroevo": ("pgpe", "sepcma"), "evotorch": ("pgpe",), "pycma": ("sepcma",)}


def _until(loss, target: float, budget: int, step) -> int | None:
    """Call ``step() -> (evaluations, centre)`` until the centre's loss <= target."""
    evaluations = 0
    while evaluations < budget:
        n, center = step()
        evaluations += n
        if float(loss(np.asarray(center, dtype=np.float64)[None])[0]) <= target:
            return evaluations
    return None


def neuroevo_run(method: str, loss, target: float, budget: int, s: dict, seed: int):
    import torch

    from neuroevo.optim.pgpe import PGPE as Pgpe
    from neuroevo.optim.sepcma import SepCMAES

    start = torch.zeros(D)
    if method == "pgpe":
        opt = Pgpe(center=start, population_size=s["popsize"], lr=s["center_lr"],
                   max_speed=s["max_speed"], momentum=s["momentum"], radius=s["radius"],
                   stdev_lr=s["stdev_lr"], stdev_max_change=s["stdev_max_change"], seed=seed)
    else:
        opt = SepCMAES(center=start, population_size=s["popsize"], sigma=s["sigma"], seed=seed)

    def step():
        pop = opt.ask()
        opt.tell((-loss(pop.params().double().numpy())).tolist())
        return len(pop), opt.center.numpy()

    return _until(loss, target, budget, step)


def evotorch_run(method: str, loss, target: float, budget: int, s: dict, seed: int):
    import torch
    from evotorch import Problem
    from evotorch.algorithms import PGPE as Reference

    problem = Problem("min", lambda x: torch.as_tensor(loss(x.double().numpy())),
                      solution_length=D, initial_bounds=(-1, 1), vectorized=True, seed=seed)
    searcher = Reference(problem, popsize=s["popsize"], center_learning_rate=s["center_lr"],
                         stdev_learning_rate=s["stdev_lr"], radius_init=s["radius"],
                         stdev_max_change=s["stdev_max_change"], optimizer="clipup",
                         optimizer_config={"max_speed": s["max_speed"],
                                           "momentum": s["momentum"]},
                         center_init=torch.zeros(D), ranking_method="centered")

    def step():  # EvoTorch's step k evaluates the population after k - 1 updates
        searcher.step()
        return s["popsize"], searcher.status["center"].clone().numpy()

    return _until(loss, target, budget, step)


def pycma_run(method: str, loss, target: float, budget: int, s: dict, seed: int):
    import cma

    es = cma.CMAEvolutionStrategy(np.zeros(D), s["sigma"], {
        "CMA_diagonal": True, "popsize": s["popsize"], "seed": seed + 1, "verbose": -9,
        "maxfevals": budget, "tolfun": 0, "tolx": 0, "tolfunhist": 0, "tolstagnation": 10**9})

    def step():
        x = es.ask()
        es.tell(x, list(loss(np.asarray(x))))
        return len(x), es.mean

    return _until(loss, target, budget, step)


RUNNERS = {"neuroevo": neuroevo_run, "evotorch": evotorch_run, "pycma": pycma_run}


def run(impl: str, out: str) -> None:
    rows = []
    for (method, fname), (target, budget, settings) in CASES.items():
        if method not in IMPLS[impl]:
            continue
        for seed in SEEDS:
            start = time.perf_counter()
            evals = RUNNERS[impl](method, FUNCTIONS[fname], target, budget, settings, seed)
            rows.append({"impl": impl, "method": method, "function": fname, "seed": seed,
                         "target": target, "budget": budget, "evaluations": evals,
                         "seconds": round(time.perf_counter() - start, 2)})
            print(json.dumps(rows[-1]), flush=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{impl}.json"), "w") as f:
        json.dump({"dims": D, "settings": {f"{m}/{fn}": v[2] for (m, fn), v in CASES.items()},
                   "versions": versions(impl), "rows": rows}, f, indent=1)


def versions(impl: str) -> dict:
    import importlib.metadata as md

    names = {"neuroevo": ["neuroevo", "torch"], "evotorch": ["evotorch", "torch"],
             "pycma": ["cma", "numpy"]}[impl]
    return {n: md.version(n) for n in names} | {"python": sys.version.split()[0]}


def _cell(evals: list) -> str:
    done = sorted(e for e in evals if e is not None)
    if not done:
        return f"none of {len(evals)}"
    q = np.percentile(done, [25, 50, 75])
    return f"{q[1]:,.0f} [{q[0]:,.0f}, {q[2]:,.0f}] ({len(done)}/{len(evals)})"


def table(out: str) -> None:
    results = {}
    for impl in RUNNERS:
        path = os.path.join(out, f"{impl}.json")
        if os.path.exists(path):
            with open(path) as f:
                results[impl] = json.load(f)
    lines = [f"D = {D}; evaluations to reach the target: median [quartiles] (seeds that "
             "reached it / seeds)", "",
             "| method | function | target | neuroevo | reference |", "|---|---|---|---|---|"]
    for (method, fname), (target, _, _) in CASES.items():
        ref = "evotorch" if method == "pgpe" else "pycma"
        cells = [_cell([r["evaluations"] for r in results[i]["rows"]
                        if (r["method"], r["function"]) == (method, fname)])
                 if i in results else "not run" for i in ("neuroevo", ref)]
        lines.append(f"| {method} | {fname} | {target:g} | {cells[0]} | {ref}: {cells[1]} |")
    lines += ["", "Versions: " + "; ".join(
        f"{i}: " + ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        for i, r in results.items())]
    with open(os.path.join(out, "references.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("impl", choices=sorted(RUNNERS))
    r.add_argument("out")
    t = sub.add_parser("table")
    t.add_argument("out")
    args = p.parse_args()
    run(args.impl, args.out) if args.command == "run" else table(args.out)


if __name__ == "__main__":
    main()
