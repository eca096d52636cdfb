"""MAP-Elites (Mouret & Clune 2015) against its grid and insertion rule worked by hand."""

import re

import numpy as np
import pytest
import torch

from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.noise import NoiseTable
from neuroevo.optim import cvt
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


def test_nearest_centroid_equals_a_naive_loop_ties_to_the_lower_index():
    rng = np.random.default_rng(3)
    centroids = torch.from_numpy(rng.random((37, 2)))
    points = torch.from_numpy(np.vstack([rng.random((500, 2)), [[0.5, 0.5]]]))
    centroids = torch.vstack([centroids, centroids[:1]])  # a duplicate: index 0 wins
    naive = [int(np.argmin([np.hypot(*(p - c)) for c in centroids.numpy()]))
             for p in points.numpy()]
    assert cvt.nearest(points, centroids).tolist() == naive


def test_the_cvt_of_an_interval_is_its_equal_cells():
    """A CVT of [0, 10] with uniform density has cells of equal width: centroids at the
    midpoints (2i + 1) * 10 / (2k)."""
    c = np.sort(cvt.centroids((0.0,), (10.0,), 8, 25000).numpy()[:, 0])
    assert np.abs(c - (2 * np.arange(8) + 1) * 10 / 16).max() < 0.1


def test_each_cvt_centroid_is_the_mass_centre_of_its_region():
    """The defining property of a CVT, checked with fresh uniform points: each region's
    mean is its centroid (within the sampling error of 25,000 points)."""
    c = cvt.centroids((0.0, 0.0), (200.0, 210.0), 50, 25000)
    x = torch.from_numpy(np.random.default_rng(9).random((200_000, 2)) * [200.0, 210.0])
    owner = cvt.nearest(x, c).numpy()
    means = np.array([x.numpy()[owner == i].mean(axis=0) for i in range(50)])
    assert np.abs(means - c.numpy()).max() < 2.0  # cells are ~29 wide
    assert torch.equal(c, cvt.centroids((0, 0), (200, 210), 50, 25000))  # one tessellation


def test_cvt_map_elites_puts_a_behaviour_in_its_nearest_region_and_resumes_only_its_own():
    opt = make(cvt_cells=30, cvt_samples=3000)
    assert opt.num_cells == 30 and opt.state.centroids.shape == (30, 2)
    bcs = np.array([[5.0, 5.0], [150.0, 60.0], [300.0, -20.0]])  # the last outside the box
    pop = opt.ask()
    m = opt.tell([1.0, 2.0, 3.0], bcs)
    cells = cvt.nearest(torch.from_numpy(bcs), opt.state.centroids).tolist()
    assert sorted(opt.state.cells) == sorted(set(cells)) and m["coverage"] == len(set(cells)) / 30
    assert opt.state.cells[cells[2]] == pop[2]
    again = make(cvt_cells=30, cvt_samples=3000)
    again.load_state_dict(opt.state_dict())
    assert again.ask().genomes == opt.ask().genomes
    for other in (make(cvt_cells=31, cvt_samples=3000), make(cvt_cells=30, cvt_samples=4000),
                  make()):
        with pytest.raises(CheckpointError, match="the checkpoint's MAP-Elites archive has "
                                                  "other cells than this run's"):
            other.load_state_dict(opt.state_dict())


def test_fewer_cvt_samples_than_cells_is_one_line():
    problems = MapElitesParams(grid_low="0,0", grid_high="1,1", cvt_cells=100,
                               cvt_samples=50).problems()
    assert problems == ["algo.cvt_samples must be at least algo.cvt_cells (100), got 50"]
