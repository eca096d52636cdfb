"""Results do not change under refactoring: short GA, ES and RS runs on CartPole, Hopper and
breakout at 2 driver threads give, row for row, the metrics recorded in fixtures/ (issue 32;
first at 23f9604), but for the timing fields: bit for bit on a machine like the recorder's
(fixtures/machine.json), elsewhere to record.REL in the floats (scripts/record_regression.py
says why)."""

import importlib.util
import json
import math
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


def same(want, have, exact: bool) -> bool:
    if exact or not isinstance(want, float) or not isinstance(have, float):
        return want == have
    return math.isclose(want, have, rel_tol=record.REL, abs_tol=1e-12)


def test_every_case_has_its_fixture():
    assert sorted(p.stem for p in FIXTURES.glob("*.jsonl")) == sorted(record.CASES)


@pytest.mark.parametrize("name", sorted(record.CASES))
def test_a_run_gives_its_recorded_metrics(name, tmp_path):
    expected, got = rows(FIXTURES / f"{name}.jsonl"), rows(record.run(name, str(tmp_path)))
    exact = json.loads((FIXTURES / "machine.json").read_text()) == record.machine()
    assert len(got) == len(expected), f"{name}: {len(got)} rows, recorded {len(expected)}"
    for want, have in zip(expected, got, strict=True):
        changed = sorted(k for k in want.keys() | have.keys()
                         if not same(want.get(k), have.get(k), exact))
        assert not changed, (f"{name}, generation {want['generation']}: {changed} changed "
                             f"({'bit for bit' if exact else f'rel {record.REL}'}: "
                             f"recorded {[want.get(k) for k in changed]}, now "
                             f"{[have.get(k) for k in changed]}); if the change is meant, "
                             "re-record: python scripts/record_regression.py")
