"""Results do not change under refactoring: short GA, ES and RS runs on CartPole, Hopper and
breakout at 2 driver threads give, row for row, the metrics recorded in fixtures/ at
23f9604 (issue 32), bit for bit but for the timing fields (scripts/record_regression.py)."""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
_spec = importlib.util.spec_from_file_location("record_regression",
                                               ROOT / "scripts" / "record_regression.py")
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)


def rows(path) -> list[dict]:
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in record.TIMING}
                for line in f]


def test_every_case_has_its_fixture():
    assert sorted(p.stem for p in FIXTURES.glob("*.jsonl")) == sorted(record.CASES)


@pytest.mark.parametrize("name", sorted(record.CASES))
def test_a_run_gives_its_recorded_metrics(name, tmp_path):
    expected, got = rows(FIXTURES / f"{name}.jsonl"), rows(record.run(name, str(tmp_path)))
    assert len(got) == len(expected), f"{name}: {len(got)} rows, recorded {len(expected)}"
    for want, have in zip(expected, got, strict=True):
        changed = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
        assert not changed, (f"{name}, generation {want['generation']}: {changed} changed "
                             f"(recorded {[want.get(k) for k in changed]}, now "
                             f"{[have.get(k) for k in changed]}); if the change is meant, "
                             "re-record: python scripts/record_regression.py")
