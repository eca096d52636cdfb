"""neuroevo: pipelined CPU-GPU neuroevolution (Deep GA, OpenAI-ES, random search, PGPE,
sep-CMA-ES)."""

__version__ = "0.1.0"

from neuroevo.api import train
from neuroevo.genomes import Perturbation, Population, SeedChain
from neuroevo.noise import NoiseTable
from neuroevo.optim import ALGORITHMS, GA, PGPE, OpenAIES, RandomSearch, SepCMAES

__all__ = ["ALGORITHMS", "GA", "PGPE", "NoiseTable", "OpenAIES", "Perturbation", "Population",
           "RandomSearch", "SeedChain", "SepCMAES", "__version__", "train"]
