"""neuroevo's OpenAI-ES against EvoTorch's ``VecGymNE`` (PGPE), side by side in one run.

    python scripts/bench_peers.py --tasks HalfCheetah-v5,Ant-v5,Humanoid-v5 --json FILE

Both sides run the same protocol (issue 17): an MLP 64-64 tanh, population 64, one episode
per member, observation normalisation, the env's own 1000-step limit; the figure is env
steps per second over ``--generations`` generations after one warm-up generation, counted
by each library (neuroevo: the generation's frames; EvoTorch: its
``total_interaction_count``). neuroevo runs as ``neuroevo run es`` builds it, without the
centre's own episodes (EvoTorch has none) and with its default layout. Rounds alternate the
two sides, each figure is the best round, and the ratio is neuroevo / EvoTorch.
``--python-loop`` adds a third side to each round: neuroevo with its MuJoCo envs stepped
through the Python loop (``NEUROEVO_NATIVE=0``) instead of ``mjnative``'s C loop.

EvoTorch runs in a venv of its own (``--evotorch-venv``, made with ``pip install evotorch``
and the CPU torch when it is absent), so neither library's dependencies reach the other.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

VENV = os.path.join(os.path.expanduser("~"), ".cache", "neuroevo-peers", "evotorch")
EVOTORCH = "evotorch==0.6.1"

EVOTORCH_PROGRAM = r"""
import json, sys, time
from evotorch.algorithms import PGPE
from evotorch.neuroevolution import VecGymNE

task, population, generations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
problem = VecGymNE(env=task, network="Linear(obs_length, 64) >> Tanh() >> Linear(64, 64) >> "
                   "Tanh() >> Linear(64, act_length)", observation_normalization=True,
                   num_episodes=1, device="cpu")
searcher = PGPE(problem, popsize=population, center_learning_rate=0.01,
                stdev_learning_rate=0.1, stdev_init=0.02)
searcher.step()  # warm-up
before, start = problem.status["total_interaction_count"], time.perf_counter()
for _ in range(generations):
    searcher.step()
steps = problem.status["total_interaction_count"] - before
print(json.dumps({"steps": steps, "seconds": time.perf_counter() - start}))
"""


def ensure_evotorch(venv: str) -> str:
    """The venv's python, with EvoTorch installed in it (made on first use)."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    probe = subprocess.run([python, "-c", "import evotorch"], capture_output=True)
    if probe.returncode != 0:
        pip = [python, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)
        subprocess.run([*pip, EVOTORCH, "gymnasium[mujoco]"], check=True)
    return python


def evotorch_rate(python: str, task: str, population: int, generations: int) -> float:
    out = subprocess.run([python, "-c", EVOTORCH_PROGRAM, task, str(population),
                          str(generations)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"bench_peers: EvoTorch on {task} failed:\n{out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["steps"] / r["seconds"]


def neuroevo_run(task: str, population: int, generations: int, sets=(), env=None) -> dict:
    """In a fresh process too, so that both sides start alike. ``sets``: ``--set`` items
    after the protocol's own (``bench_mujoco_layout.py`` sets the layout with them).
    ``env``: variables set for that process. Returns ``steps_per_s`` and ``timings``, each
    stage's seconds summed over the drivers."""
    program = r"""
import json, sys, time
from neuroevo.build import build
from neuroevo.config import Config, apply_sets
from neuroevo.evaluation import evaluate_one
from neuroevo.loop import merge_observations
task, population, generations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg = Config()
apply_sets(cfg, ["algo.name=es", f"env.id={task}", f"algo.population={population}",
                 "net.name=mlp", "net.hidden=64,64", "algo.validation_episodes=0",
                 "engine.device=cpu", *sys.argv[4:]])
built = build(cfg)

def generation():
    r = evaluate_one(built.evaluator, built.optimizer.ask())
    merge_observations(built.obs_norm, r)
    built.optimizer.tell(r.fitness)
    return r

generation()  # warm-up
start = time.perf_counter()
results = [generation() for _ in range(generations)]
seconds = time.perf_counter() - start
timings = {}
for r in results:
    for k, v in r.timings.items():
        timings[k] = timings.get(k, 0.0) + v
print(json.dumps({"steps_per_s": sum(r.frames for r in results) / seconds,
                  "timings": timings}))
built.evaluator.close()
"""
    out = subprocess.run([sys.executable, "-c", program, task, str(population),
                          str(generations), *sets], capture_output=True, text=True,
                         timeout=3600, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: neuroevo on {task} failed:\n"
                         f"{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default="HalfCheetah-v5,Ant-v5,Humanoid-v5")
    p.add_argument("--population", type=int, default=64)
    p.add_argument("--generations", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--evotorch-venv", default=VENV)
    p.add_argument("--python-loop", action="store_true",
                   help="also run neuroevo with the Python stepping loop (NEUROEVO_NATIVE=0)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    python = ensure_evotorch(args.evotorch_venv)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "evotorch": EVOTORCH,
              "population": args.population, "generations": args.generations,
              "net": "mlp 64-64 tanh", "tasks": {}}
    for task in args.tasks.split(","):
        ours, theirs, loop = [], [], []
        for k in range(args.rounds):
            print(f"{task}: round {k + 1}/{args.rounds}", file=sys.stderr, flush=True)
            ours.append(neuroevo_run(task, args.population, args.generations)["steps_per_s"])
            theirs.append(evotorch_rate(python, task, args.population, args.generations))
            if args.python_loop:
                loop.append(neuroevo_run(task, args.population, args.generations,
                                         env={"NEUROEVO_NATIVE": "0"})["steps_per_s"])
        t = result["tasks"][task] = {"neuroevo_steps_per_s": max(ours),
                                     "evotorch_steps_per_s": max(theirs),
                                     "ratio": max(ours) / max(theirs), "rounds": [ours, theirs]}
        line = (f"{task:<16} neuroevo {t['neuroevo_steps_per_s']:>9,.0f}  EvoTorch "
                f"{t['evotorch_steps_per_s']:>9,.0f} steps/s  ratio {t['ratio']:.2f}")
        if loop:
            t.update(python_loop_steps_per_s=max(loop), native_vs_python_loop=max(ours) / max(loop),
                     python_loop_rounds=loop)
            line += (f"  (Python loop {max(loop):,.0f}: the C loop "
                     f"{t['native_vs_python_loop']:.2f}x)")
        print(line, flush=True)
    result["time"] = time.strftime("%Y-%m-%d %H:%M")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
