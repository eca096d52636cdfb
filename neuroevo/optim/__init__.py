"""Ask/tell optimizers over flat parameter vectors; they know nothing about environments.

``ALGORITHMS`` is the registry (``neuroevo.optim.registry``): an algorithm is its module and
one line below.
"""

from neuroevo.optim import ga, gans, mapelites, nses, openai_es, pgpe, random_search, sepcma
from neuroevo.optim.ga import GA
from neuroevo.optim.openai_es import OpenAIES
from neuroevo.optim.pgpe import PGPE
from neuroevo.optim.random_search import RandomSearch
from neuroevo.optim.registry import Algorithm, Params, Registry, Start, param
from neuroevo.optim.sepcma import SepCMAES

ALGORITHMS = Registry()
ALGORITHMS.register(ga.ALGORITHM)
ALGORITHMS.register(openai_es.ALGORITHM)
ALGORITHMS.register(random_search.ALGORITHM)
ALGORITHMS.register(pgpe.ALGORITHM)
ALGORITHMS.register(sepcma.ALGORITHM)
ALGORITHMS.register(gans.ALGORITHM)
ALGORITHMS.register(mapelites.ALGORITHM)
for _algorithm in nses.ALGORITHMS:  # NS-ES, NSR-ES, NSRA-ES
    ALGORITHMS.register(_algorithm)

__all__ = ["ALGORITHMS", "GA", "PGPE", "Algorithm", "OpenAIES", "Params", "RandomSearch",
           "Registry", "SepCMAES", "Start", "param"]
