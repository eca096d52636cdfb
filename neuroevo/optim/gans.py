"""GA-NS: the Deep GA selecting its parents on novelty instead of reward (Such et al. 2017,
"Deep Neuroevolution", arXiv 1712.06567, section 4.3, after Lehman & Stanley 2011's novelty
search), on the GA's seed-chain genomes.

Each generation is the Deep GA's (``neuroevo.optim.ga``) with one change: the parents are
the ``truncation`` members of highest novelty, not of highest reward. A member's novelty is
the mean distance of its behaviour characterisation (BC) to its ``k`` nearest neighbours
among the archive and the other members of its generation (Lehman & Stanley: the archive
plus the current population). After the generation's novelties are computed, each member's
BC joins the archive with probability ``archive_probability`` (a stochastic archive, as in
the Deep GA paper's GA-NS; the archive is never pruned). The elite, which the run deploys
and tests, is still chosen on reward (the GA's elite candidates and validation), so that
what a run reports is its best policy; it also stays a parent, as in the GA. With
``train_episodes`` > 1 (the GA's; a deviation from the paper) a member's BC is the mean of
its episodes' BCs.

Where we may differ from the paper: its text was not available to us while writing this,
and no code of its GA-NS was released (the authors' README: "will be added later on"); k =
10 and the insertion probability 0.01 are our defaults, to be checked against the paper's
supplementary table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import check_range
from neuroevo.genomes import Population
from neuroevo.optim.ga import GA, GAParams, GAState, ga_arguments
from neuroevo.optim.novelty import METRICS as NOVELTY_METRICS
from neuroevo.optim.novelty import append, population_novelty
from neuroevo.optim.registry import Algorithm, Start, at_least, param
from neuroevo.optim.shaping import top_k
from neuroevo.schema import tensor

ARCHIVE_STREAM = 0x4E53  # "NS": the archive's draws, apart from the GA's own


@dataclass
class GANSState(GAState):
    archive: torch.Tensor | None = field(default=None, metadata=tensor(("n", "d"),
                                                                        torch.float64))


class GANS(GA):
    """GA-NS (module docstring). ``k``: nearest neighbours of novelty (10);
    ``archive_probability``: the chance that a member's BC joins the archive (0.01)."""

    name = "gans"
    uses_behaviour = True
    metrics = (*GA.metrics, *NOVELTY_METRICS)

    def __init__(self, num_params: int | None = None, *, k: int = 10,
                 archive_probability: float = 0.01, **kwargs):
        super().__init__(num_params, **kwargs)
        check_range("k", k, isinstance(k, int) and k >= 1, "an integer >= 1 (the paper: 10)")
        check_range("archive_probability", archive_probability,
                    0 <= archive_probability <= 1, "in [0, 1]")
        self.k, self.archive_probability = k, float(archive_probability)
        self.state = GANSState()

    def _tell_behaviour(self, pop: Population, fitness: np.ndarray, behaviour: np.ndarray
                        ) -> tuple[dict, bool]:
        s = self.state
        if s.phase == "validate":
            return self._tell(pop, fitness)
        members, means, best, behaviour = self._members(pop, fitness, behaviour)
        novelties = population_novelty(s.archive, behaviour, self.k)
        draws = np.random.default_rng([self.seed, s.generation, ARCHIVE_STREAM])
        joins = behaviour[draws.random(len(members)) < self.archive_probability]
        s.archive = torch.as_tensor(joins) if s.archive is None else append(s.archive, joins)
        metrics, done = self._select(members, means, top_k(means, len(means)),
                                     top_k(novelties, len(novelties)), best)
        return {**metrics, "novelty_mean": float(novelties.mean()),
                "archive_size": len(s.archive)}, done


@dataclass(frozen=True)
class GANSParams(GAParams):
    k: int = param(10, ">= 1", at_least(1))  # nearest neighbours of novelty (paper: 10)
    archive_probability: float = param(0.01, "in [0, 1]", lambda v: 0 <= v <= 1)  # the chance
    # that a member's behaviour joins the novelty archive


def from_config(p: GANSParams, start: Start) -> GANS:
    return GANS(**ga_arguments(p, start), k=p.k, archive_probability=p.archive_probability)


ALGORITHM = Algorithm(GANS, GANSParams, from_config, pbt=("sigma", "truncation"),
                      doc="GA-NS (Such et al. 2017): the Deep GA selecting parents on novelty")
