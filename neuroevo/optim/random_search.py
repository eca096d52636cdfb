"""Random search as in Such et al. 2017: the Deep GA with no selection.

Every generation draws fresh random initialisations (``SeedChain``s with no mutations);
the elite is chosen by the GA's rule (Algorithm 1): the previous elite, carried as member 0
as in the GA, and the best fresh networks are re-scored on fresh validation episodes, and
the best mean is the elite. ``train_episodes`` > 1 ranks the fresh networks on the mean of
that many training episodes, as in the GA (a deviation from the paper, which plays one;
``neuroevo.optim.ga``). So the reported elite score is always a fresh measurement of
the current elite, never a stale running maximum over generations.
"""

from __future__ import annotations

import numpy as np

from neuroevo.genomes import SeedChain
from neuroevo.metrics import BY_NAME
from neuroevo.noise import NoiseTable
from neuroevo.optim.ga import GA, EliteParams
from neuroevo.optim.registry import Algorithm, Start


class RandomSearch(GA):
    """Random initialisations only; ``elite`` is chosen and re-scored as in the GA."""

    name = "rs"
    metrics = (BY_NAME["elite_score"],)

    def __init__(self, num_params: int | None = None, *, center=None, init_std=1.0,
                 population_size: int = 1000, elite_candidates: int = 10,
                 validation_episodes: int = 30, train_episodes: int = 1, seed: int = 0,
                 noise: NoiseTable | None = None, nonfinite: str = "raise"):
        super().__init__(num_params, center=center, init_std=init_std,
                         population_size=population_size, truncation=1, sigma=1.0,
                         elite_candidates=elite_candidates,
                         validation_episodes=validation_episodes,
                         train_episodes=train_episodes, seed=seed, noise=noise,
                         nonfinite=nonfinite, cache_size=0)

    def _check_selection(self, population_size: int, truncation: int) -> None:
        pass  # no selection: any population size >= 1 works

    def _offspring(self, rng: np.random.Generator) -> list[SeedChain]:
        if self.state.elite is None:
            return self._fresh(rng, self.population_size)
        return [self.state.elite, *self._fresh(rng, self.population_size - 1)]

    def _tell(self, pop, fitness):
        metrics, done = super()._tell(pop, fitness)
        metrics.pop("sigma", None)  # RS draws fresh networks; there is no mutation power
        return metrics, done


def from_config(p: EliteParams, start: Start) -> RandomSearch:
    return RandomSearch(start.num_params, init_std=start.init_std,
                        population_size=start.population, elite_candidates=p.elite_candidates,
                        validation_episodes=p.validation_episodes,
                        train_episodes=p.train_episodes, seed=start.seed)


ALGORITHM = Algorithm(RandomSearch, EliteParams, from_config,
                      doc="random search (Such et al. 2017): the GA with no selection")
