"""The one metrics schema: every key a run writes is declared, and the views derive from it."""

import pytest

from neuroevo import ALGORITHMS, train
from neuroevo.metrics import BY_NAME, CSV_COLUMNS, live_line

CARTPOLE = dict(env__id="CartPole-v1", net__hidden="8", algo__population=6,
                algo__validation_episodes=2, engine__device="cpu", budget__generations=2)


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_every_key_of_a_real_row_is_declared(algo):
    """In ``neuroevo.metrics`` or by the algorithm's optimizer (``Optimizer.metrics``)."""
    uses = ALGORITHMS[algo].optimizer.uses_behaviour  # novelty search: a behaviour function
    keys = {k: v for k, v in CARTPOLE.items()  # the NS family validates no elite
            if not k.startswith("algo__") or k[6:] in ALGORITHMS[algo].config_keys()
            or k == "algo__population"}
    if algo == "mapelites":  # its grid has no default: over the behaviour's range
        keys.update(algo__grid_low="-1,-1", algo__grid_high="1,1")
    rows = train(algo__name=algo, behaviour=(lambda obs: obs[:2]) if uses else None,
                 **keys).history
    tests = {"test_score", "test_score_std", "test_episodes", "test_frames"}
    declared = set(BY_NAME) | {m.name for m in ALGORITHMS[algo].optimizer.metrics}
    for row in rows:
        assert set(row) <= declared, set(row) - declared
        assert set(CSV_COLUMNS) - set(row) <= {"elite_score", "center_score", *tests}
    assert tests <= set(rows[-1]) and not tests & set(rows[0])  # the last generation is tested


def test_the_live_line_by_hand():
    row = {"generation": 3, "frames": 1234567, "fps": 8901.4, "fitness_max": 21.0,
           "fitness_mean": -3.25, "elite_score": 7.5, "occupancy": 0.9}
    assert live_line(row) == ("gen    3  frames   1,234,567  fps   8,901  max     21.0  "
                              "mean     -3.2  elite      7.5")
    del row["elite_score"]
    assert live_line({**row, "center_score": None}).endswith("mean     -3.2")  # null: left out

