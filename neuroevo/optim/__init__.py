"""Ask/tell optimizers over flat parameter vectors; they know nothing about environments."""

from neuroevo.optim.ga import GA
from neuroevo.optim.openai_es import OpenAIES
from neuroevo.optim.random_search import RandomSearch

OPTIMIZERS = {cls.name: cls for cls in (GA, OpenAIES, RandomSearch)}

__all__ = ["GA", "OPTIMIZERS", "OpenAIES", "RandomSearch"]
