"""The one training driver: callbacks, the guard, closing, and the CLI == neuroevo.train."""

import contextlib
import json
import subprocess
import sys

import pytest

from neuroevo import train
from neuroevo.config import DEFAULT_GENERATIONS
from neuroevo.loop import Callback

CARTPOLE = dict(env__id="CartPole-v1", net__hidden="8", algo__population=6,
                algo__elite_candidates=2, algo__validation_episodes=2, engine__device="cpu",
                seed=3)
FITNESS = ("generation", "frames", "episodes", "fitness_max", "fitness_mean", "fitness_min",
           "elite_score", "best_fitness")


class Recorder(Callback):
    def __init__(self, log: list, fail_at: int | None = None):
        self.log, self.fail_at = log, fail_at

    def episode(self, done, total, score, frames):
        self.log.append(("episode", done, total))

    def generation(self, row, totals, history):
        assert row is history[-1] and totals.generation == len(history)
        assert totals.frames == row["frames"]
        self.log.append(("generation", row["generation"]))
        if row["generation"] == self.fail_at:
            raise RuntimeError("a callback failed")

    def close(self):
        self.log.append(("close",))


def test_callbacks_see_every_episode_and_row_in_order_inside_the_guard():
    log: list = []

    @contextlib.contextmanager
    def guard():
        log.append(("enter",))
        yield
        log.append(("exit",))

    first, second = Recorder(log), Recorder([])
    from neuroevo.build import build
    from neuroevo.config import Config, override
    from neuroevo.loop import Budget, generations

    cfg = Config()
    for key, value in {**CARTPOLE, "budget__generations": 2}.items():
        override(cfg, key.replace("__", "."), value)
    built = build(cfg)
    try:
        history = generations(built.optimizer, built.evaluator, Budget.of(built.config),
                              callbacks=[first, second], guard=guard)
    finally:
        built.evaluator.close()
    # Each generation: 6 training episodes, then 2 candidates x 2 validation episodes.
    one = ([("episode", k, 6) for k in range(1, 7)] + [("episode", k, 4) for k in range(1, 5)])
    assert log == [*one, ("enter",), ("generation", 0), ("exit",),
                   *one, ("enter",), ("generation", 1), ("exit",), ("close",)]
    assert [e for e in second.log if e[0] == "generation"] == [("generation", 0),
                                                               ("generation", 1)]
    assert [r["generation"] for r in history] == [0, 1]


def test_callbacks_are_closed_when_one_fails():
    log: list = []
    with pytest.raises(RuntimeError, match="a callback failed"):
        train(**CARTPOLE, budget__generations=3, callbacks=[Recorder(log, fail_at=1)])
    assert [e for e in log if e[0] != "episode"] == [("generation", 0), ("generation", 1),
                                                     ("close",)]


def test_the_cli_and_train_share_the_driver_and_its_default_budget(tmp_path):
    """Neither gives a budget: both run DEFAULT_GENERATIONS generations, with equal rows."""
    rows = train(**CARTPOLE).history
    assert len(rows) == DEFAULT_GENERATIONS
    sets = [f"--set={k.replace('__', '.')}={v}" for k, v in CARTPOLE.items()
            if k not in ("seed", "algo__population", "engine__device")]
    out = subprocess.run([sys.executable, "-m", "neuroevo", "run", "ga", "--env", "CartPole-v1",
                          "--population", "6", "--seed", "3", "--device", "cpu", *sets,
                          "--run-dir", "r", "--no-progress"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    written = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    assert [[r.get(k) for k in FITNESS] for r in written] == [[r.get(k) for k in FITNESS]
                                                               for r in rows]
