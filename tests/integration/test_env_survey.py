"""scripts/env_survey.py on a sample of ids (the full registry is a script run, issue 36):
each id runs or is refused in one line; none fails."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "env_survey.py"
spec = importlib.util.spec_from_file_location("env_survey", SCRIPT)
env_survey = sys.modules["env_survey"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(env_survey)

SAMPLE = ["CartPole-v1", "LunarLanderContinuous-v3", "Hopper-v3", "GymV26Environment-v0",
          "Breakout-v4", "ALE/Pong-v5", "phys2d/CartPole-v1"]


@pytest.mark.slow
def test_a_sample_of_ids_runs_or_is_refused_in_one_line(tmp_path):
    assert env_survey.main([str(tmp_path), "--ids", ",".join(SAMPLE), "--label", "ci"]) == 0
    results = json.loads((tmp_path / "survey-ci.json").read_text())["results"]
    outcome = {r["id"]: r["outcome"] for r in results}
    assert list(outcome) == SAMPLE and "failed" not in outcome.values()
    assert outcome["CartPole-v1"] == outcome["ALE/Pong-v5"] == "ran"
    assert outcome["Hopper-v3"] == outcome["Breakout-v4"] == "refused"
    assert "0 failed" in (tmp_path / "survey-ci.md").read_text()


def test_all_ids_holds_the_registry_and_one_v5_id_per_rom():
    import ale_py.roms

    ids = env_survey.all_ids()
    assert "CartPole-v1" in ids and "ALE/Breakout-v5" in ids and "Breakout-v4" in ids
    roms = [i for i in ids if i.startswith(("ALE/", "game:"))]
    assert len(roms) == len(ale_py.roms.get_all_rom_ids()) and "game:combat" in roms
