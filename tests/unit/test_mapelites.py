"""MAP-Elites (Mouret & Clune 2015) against its grid and insertion rule worked by hand."""

import re

import numpy as np
import pytest
import torch

from neuroevo.errors import ConfigError
from neuroevo.noise import NoiseTable
from neuroevo.optim.mapelites import MapElites, MapElitesParams

NOISE = NoiseTable.shared(7, 1 << 16)


def make(**kw):
    return MapElites(6, grid_low=(0.0, 0.0), grid_high=(200.0, 200.0), bins=20,
                     population_size=3, seed=1, noise=NOISE, **kw)


def test_cells_of_the_grid_by_hand():
    cells = make().cell_of(np.array([[5.0, 5.0], [199.0, 0.0], [10.0, 15.0], [-5.0, 300.0],
                                     [200.0, 200.0]]))
    # 10-wide cells, row-major over (x, y); outside the bounds: the nearest edge cell
    assert cells.tolist() == [0, 19 * 20, 1 * 20 + 1, 0 * 20 + 19, 19 * 20 + 19]


def test_a_cell_keeps_the_first_best_and_children_come_from_filled_cells():
    opt = make(qd_offset=-10.0)
    pop = opt.ask()
    same = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])  # all in cell 0
    m = opt.tell([1.0, 3.0, 3.0], same)
    assert opt.state.cells == {0: pop[1]}  # 3 beats 1; the second 3 does not replace it
    assert m["coverage"] == 1 / 400 and m["qd_score"] == 3.0 + 10.0
    children = opt.ask()
    assert all(child.parent == pop[1] for child in children)
    m = opt.tell([2.0, 4.0, 0.5], np.array([[1.0, 1.0], [1.5, 1.5], [150.0, 25.0]]))
    assert opt.state.cells == {0: children[1], 15 * 20 + 2: children[2]}
    assert m["cells_filled"] == 2 and m["qd_score"] == (4.0 + 10) + (0.5 + 10)
    assert torch.equal(opt.deployed_params(), opt.decoder().decode(children[1]))
    with pytest.raises(ConfigError, match=r"cell 5 of the MAP-Elites grid is empty; filled "
                                          r"cells: \[0, 302\]"):
        opt.member_params(5)


def test_a_behaviour_of_other_dimensions_than_the_grid_is_refused():
    opt = make()
    opt.ask()
    with pytest.raises(ConfigError, match="the behaviour has 3 dimensions but the grid 2"):
        opt.tell([0.0, 0.0, 0.0], np.zeros((3, 3)))


@pytest.mark.parametrize("low, high, message", [
    ("", "1,1", r"algo.grid_low must be finite numbers, one per behaviour dimension"),
    ("0,0", "0,5", r"algo.grid_high must be above algo.grid_low in every dimension"),
    ("0,0", "5", r"algo.grid_high must be above algo.grid_low in every dimension"),
    ("0,x", "5,5", r"algo.grid_low must be finite numbers separated by commas"),
])
def test_empty_or_inverted_bounds_are_one_line(low, high, message):
    problems = MapElitesParams(grid_low=low, grid_high=high).problems()
    assert len(problems) == 1 and re.search(message, problems[0])
