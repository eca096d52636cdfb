"""The algorithm registry: an algorithm is one module in ``neuroevo/optim/`` and one
``ALGORITHMS.register`` line (``neuroevo/optim/__init__.py``, or a user's own module).

The module declares an ``Algorithm``:

- ``params``: a frozen ``Params`` dataclass, its ``algo.*`` config keys with types, defaults
  (the algorithm's), allowed ranges (``param``) and one comment each, and ``resolved``
  for the values it derives (GA: ``truncation`` 0 becomes ``population // 5``);
- ``from_config(params, start)``: the optimizer of a run (``Start``: what the run gives);
- ``pbt``: the keys PBT may change in the middle of a run (they shape no optimizer state);

and its optimizer class says what a run deploys (``deploys``: its elite or its centre), the
metrics its ``tell`` adds to a generation's row (``metrics``) and the classes its state
dict holds (``state_types``, for the checkpoint's safe loader). Config validation, ``--set``
suggestions, sweeps, ``play``, checkpoints, ``bench`` and ``plot`` read this registry; no
other module compares an algorithm's name.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import torch

from neuroevo.errors import ConfigError, UnknownName
from neuroevo.metrics import BY_NAME, Metric


def param(default, allowed: str, ok: Callable[[typing.Any], bool]):
    """A ``Params`` field: its default, and its allowed range as text and as a check."""
    return field(default=default, metadata={"allowed": allowed, "ok": ok})


def at_least(n: int) -> Callable[[typing.Any], bool]:
    """The check of an integer key >= ``n``."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= n


@dataclass(frozen=True)
class Params:
    """Base of an algorithm's config keys (a frozen dataclass of ``param`` fields)."""

    def resolved(self, population: int, train_episodes: int = 1) -> Params:
        """These keys with each automatic value replaced by the one the run takes;
        ``train_episodes`` is the env kind's choice of training episodes per member, for an
        algorithm whose key of that name is left automatic (``envs.spec.Kind``)."""
        return self

    def largest_pass(self, population: int) -> int:
        """The most members one ``ask`` gives (what the engine is sized for)."""
        return population

    def logging_episodes(self) -> int:
        """Episodes of the centre per generation, for the row's ``center_score`` only."""
        return 0

    def problems(self) -> list[str]:
        """One line per key out of its range (``algo.KEY must be ..., got ...``)."""
        out = []
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if "ok" in meta and not meta["ok"](value):
                out.append(f"algo.{f.name} must be {meta['allowed']}, got {value!r}")
        return out


@dataclass(frozen=True)
class Start:
    """What a run gives an algorithm to start from."""

    num_params: int  # D, the policy's parameter count
    population: int  # members per generation (algo.population)
    seed: int  # the run's seed
    init_std: torch.Tensor  # [D] std of each parameter in the policy's random initialisation
    shapes: tuple  # the parameter blocks' shapes in flat order (low-rank perturbations)
    initial: Callable[..., torch.Tensor]  # initial(index=0): a random network drawn from the
    # seed, a centre (index > 0: another, for a meta-population of centres)


@dataclass(frozen=True)
class Algorithm:
    optimizer: type  # an ``Optimizer`` subclass; its ``name`` is the algorithm's
    params: type  # a ``Params`` subclass
    from_config: Callable  # (params, Start) -> optimizer
    pbt: tuple[str, ...] = ()  # algo keys PBT may change in the middle of a run
    doc: str = ""  # one line for ``neuroevo run --help``

    @property
    def name(self) -> str:
        return self.optimizer.name

    def config_keys(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.params))

    def hints(self) -> dict[str, type]:
        mine = self.config_keys()
        return {k: v for k, v in typing.get_type_hints(self.params).items() if k in mine}

    def make_params(self, values: Mapping) -> Params:
        """``Params`` from config values; ``None`` takes the algorithm's default."""
        return self.params(**{k: values[k] for k in self.config_keys()
                              if values.get(k) is not None})

    def check(self, params: Params) -> None:
        """Raise ``ConfigError`` for the first key out of its range."""
        problems = params.problems()
        if problems:
            raise ConfigError(problems[0])


class Registry(Mapping):
    """Algorithms by name; ``register`` checks that a key two algorithms share has one type."""

    def __init__(self, *algorithms: Algorithm):
        self._by_name: dict[str, Algorithm] = {}
        self.version = 0  # bumped by every registration (config caches its section type)
        for algorithm in algorithms:
            self.register(algorithm)

    def register(self, algorithm: Algorithm) -> Algorithm:
        if algorithm.name in self._by_name:
            raise ConfigError(f"an algorithm named {algorithm.name!r} is registered already; "
                              "give the new one another name")
        if not (issubclass(algorithm.params, Params) and
                dataclasses.is_dataclass(algorithm.params)):
            raise ConfigError(f"{algorithm.name}'s params must be a Params dataclass")
        known = self.key_types()
        for key, hint in algorithm.hints().items():
            theirs = known.get(key)
            if theirs is not None and theirs != hint:
                raise ConfigError(f"algo.{key} is {theirs} in {', '.join(self.users(key))} "
                                  f"but {hint} in {algorithm.name}; one config key has one type")
        self._by_name[algorithm.name] = algorithm
        self.version += 1
        return algorithm

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's toy algorithm)."""
        del self._by_name[name]
        self.version += 1

    def __getitem__(self, name: str) -> Algorithm:
        if name not in self._by_name:
            raise UnknownName("algorithm", name, self._by_name)
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def key_types(self) -> dict[str, type]:
        """Every algorithm key and its type, in registration order."""
        out: dict[str, type] = {}
        for algorithm in self._by_name.values():
            for key, hint in algorithm.hints().items():
                out.setdefault(key, hint)
        return out

    def users(self, key: str) -> list[str]:
        """The algorithms that read ``algo.KEY``."""
        return [name for name, a in self._by_name.items() if key in a.config_keys()]

    def metrics(self) -> tuple[Metric, ...]:
        """The registered optimizers' own metrics (those ``neuroevo.metrics`` lacks)."""
        out: dict[str, Metric] = {}
        for a in self._by_name.values():
            out.update({m.name: m for m in a.optimizer.metrics if m.name not in BY_NAME})
        return tuple(out.values())

    def state_types(self) -> dict[str, type]:
        """The classes any registered optimizer's state dict holds, by class name."""
        return {cls.__name__: cls for a in self._by_name.values()
                for cls in a.optimizer.state_types}
