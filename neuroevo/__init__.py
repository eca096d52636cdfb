"""neuroevo: pipelined CPU-GPU neuroevolution (Deep GA, OpenAI-ES, random search)."""

__version__ = "0.1.0"

from neuroevo.api import train
from neuroevo.genomes import Perturbation, Population, SeedChain
from neuroevo.noise import NoiseTable
from neuroevo.optim import GA, OPTIMIZERS, OpenAIES, RandomSearch

__all__ = ["GA", "OPTIMIZERS", "NoiseTable", "OpenAIES", "Perturbation", "Population",
           "RandomSearch", "SeedChain", "__version__", "train"]
