"""Compact genomes, their decoders, and the ``Population`` that optimizers hand to evaluators.

A Deep GA genome is a seed chain ``(init_seed, (seed_1, sigma_1), ..., (seed_k, sigma_k))``
(Such et al. 2017, section 3): the parameters are the initial network named by
``init_seed`` plus ``sigma_i * noise(seed_i)`` for each mutation in order. An ES member is
``center + sign * sigma * noise(seed)``. Both decode from one ``NoiseTable``, so every device
and machine rebuilds the same tensor from a few integers.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from neuroevo.errors import ConfigError
from neuroevo.lowrank import LowRank
from neuroevo.noise import NoiseTable
from neuroevo.schema import integer
from neuroevo.serial import loads_strict

SEED_BOUND = 1 << 32  # seeds are stored as uint32
JSON_FORMAT = "neuroevo.seedchain/1"


@dataclass(frozen=True)
class SeedChain:
    """A Deep GA genome. Hashable, so decoders can cache parents by genome."""

    init_seed: int = field(metadata=integer(0, SEED_BOUND))
    mutations: tuple[tuple[int, float], ...] = field(default=(), metadata=integer(0, SEED_BOUND))
    # (seed, sigma) pairs: the checkpoint's check takes the range for the seeds, finite sigmas

    @property
    def parent(self) -> SeedChain | None:
        return SeedChain(self.init_seed, self.mutations[:-1]) if self.mutations else None

    def mutate(self, seed: int, sigma: float) -> SeedChain:
        return SeedChain(self.init_seed, (*self.mutations, (int(seed), float(sigma))))

    def __len__(self) -> int:
        return len(self.mutations)

    def to_json(self, **meta) -> str:
        """A small JSON document: seeds packed as base64 uint32, sigmas run-length encoded.

        A 1,000-mutation genome takes about 5.4 KB whatever the network size.
        """
        seeds = np.array([s for s, _ in self.mutations], dtype="<u4")
        runs: list[list] = []
        for _, sigma in self.mutations:
            if runs and runs[-1][0] == sigma:
                runs[-1][1] += 1
            else:
                runs.append([sigma, 1])
        doc = {"format": JSON_FORMAT, "init_seed": self.init_seed,
               "seeds": base64.b64encode(seeds.tobytes()).decode("ascii"), "sigmas": runs, **meta}
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SeedChain:
        try:
            doc = loads_strict(text)
            if not isinstance(doc, dict):
                raise TypeError("not a JSON object")
            if doc.get("format") != JSON_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}")
            seeds = np.frombuffer(base64.b64decode(doc["seeds"]), dtype="<u4").tolist()
            sigmas = [float(s) for s, n in doc["sigmas"] for _ in range(int(n))]
            if len(seeds) != len(sigmas):
                raise ValueError(f"{len(seeds)} seeds but {len(sigmas)} sigmas")
            return cls(int(doc["init_seed"]), tuple(zip(seeds, sigmas, strict=True)))
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"not a {JSON_FORMAT} genome document ({e}); "
                              "pass the text written by SeedChain.to_json()") from None


@dataclass(frozen=True)
class Perturbation:
    """An ES member: ``center + sign * sigma * noise(seed)``; antithetic pairs share the seed."""

    seed: int
    sign: int


def perturbation(noise: NoiseTable, lowrank: LowRank | None, seed: int, num_params: int,
                 device) -> torch.Tensor:
    """``[D]`` noise named by ``seed``: a table slice, or its low-rank form (``lowrank``)."""
    if lowrank is not None:
        return lowrank.vector(noise, seed, device)
    return noise.slice(seed, num_params, device)


class ChainDecoder:
    """Decodes seed chains on one device, caching the genomes it decoded as parents.

    Only prefixes (parents) enter the LRU cache, so a generation of N children does not evict
    the T parents: decoding a child costs one mutation, and decoding the next generation's
    parents costs one mutation each from this generation's cached parents. Cached and
    uncached decodes run the same float32 operations in the same order, so they are equal
    bit for bit.
    """

    def __init__(self, noise: NoiseTable, num_params: int, init_mean=None, init_std=1.0,
                 cache_size: int = 64, device=None, lowrank: LowRank | None = None):
        self.noise, self.num_params, self.device = noise, num_params, torch.device(device or "cpu")
        self.lowrank = lowrank  # mutations of rank r per matrix (``neuroevo.lowrank``); None: full
        self.init_mean = None if init_mean is None else torch.as_tensor(
            init_mean, dtype=torch.float32).to(self.device)
        self.init_std = torch.as_tensor(init_std, dtype=torch.float32).to(self.device)
        self.cache_size = cache_size
        self._cache: OrderedDict[SeedChain, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()

    def _init(self, seed: int) -> torch.Tensor:
        theta = self.noise.slice(seed, self.num_params, self.device) * self.init_std
        return theta if self.init_mean is None else self.init_mean + theta

    def _lookup(self, genome: SeedChain) -> torch.Tensor | None:
        theta = self._cache.get(genome)
        if theta is not None:
            self._cache.move_to_end(genome)
        return theta

    def _remember(self, genome: SeedChain, theta: torch.Tensor) -> None:
        if self.cache_size > 0:
            self._cache[genome] = theta
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _mutate(self, theta: torch.Tensor, mutation: tuple[int, float]) -> torch.Tensor:
        seed, sigma = mutation
        return theta + self.mutation(seed) * sigma

    def mutation(self, seed: int) -> torch.Tensor:
        """``[D]`` noise of the mutation ``seed`` (before its sigma)."""
        return perturbation(self.noise, self.lowrank, seed, self.num_params, self.device)

    def parts(self, genome: SeedChain) -> tuple[torch.Tensor, int, float] | None:
        with self._lock:
            return self._parts(genome)

    def lowrank_parts(self, genome: SeedChain) -> tuple:
        """``(key, base, factors, scale)``: ``genome`` = its parent (the base, decoded once
        and cached) plus ``scale`` times the low-rank perturbation of its last mutation; an
        initial network is its own base, at scale 0."""
        with self._lock:
            if genome.parent is None:  # not cached: only parents enter the cache
                key, seed, sigma, base = genome, 0, 0.0, self._decode(genome)
            else:
                key, (seed, sigma) = genome.parent, genome.mutations[-1]
                base = self._lookup(key)
                if base is None:
                    base = self._decode(key)
                    self._remember(key, base)
        # keyed by this decoder too: another run's equal genome is another network
        return ((self, key), base, self.lowrank.factors(self.noise, seed, self.device),
                float(sigma))

    def decode(self, genome: SeedChain) -> torch.Tensor:
        """``[D]`` float32 parameters of ``genome``; never modify the result in place."""
        with self._lock:  # driver threads share a generation's decoder and its cache
            return self._decode(genome)

    def _parts(self, genome: SeedChain) -> tuple[torch.Tensor, int, float] | None:
        """``(base, offset, scale)`` with ``genome = base + noise[offset:offset+D] * scale``
        when ``genome``'s parent is cached (then a fused kernel can write it straight into
        slot storage), else None (use ``decode``)."""
        if genome.parent is None or genome in self._cache or self.lowrank is not None:
            return None
        parent = self._lookup(genome.parent)
        if parent is None:
            return None
        seed, sigma = genome.mutations[-1]
        return parent, self.noise.offset(seed, self.num_params), float(sigma)

    def _decode(self, genome: SeedChain) -> torch.Tensor:
        theta = self._lookup(genome)
        if theta is not None or genome.parent is None:
            return theta if theta is not None else self._init(genome.init_seed)
        # Replay from the longest cached prefix up to the parent, and keep the parent:
        # its siblings are decoded next.
        done = len(genome) - 1
        while done >= 0:
            theta = self._lookup(SeedChain(genome.init_seed, genome.mutations[:done]))
            if theta is not None:
                break
            done -= 1
        if theta is None:
            theta, done = self._init(genome.init_seed), 0
        for mutation in genome.mutations[done:-1]:
            theta = self._mutate(theta, mutation)
        self._remember(genome.parent, theta)
        return self._mutate(theta, genome.mutations[-1])

    def replay(self, genome: SeedChain) -> torch.Tensor:
        """Decode from scratch, without reading or writing the cache."""
        theta = self._init(genome.init_seed)
        for mutation in genome.mutations:
            theta = self._mutate(theta, mutation)
        return theta


class PerturbationDecoder:
    """Decodes ES members around a fixed centre on one device: ``center + sign * sigma *
    eps(seed)``, with ``sigma`` one float or a ``[D]`` tensor of per-parameter stds (PGPE,
    sep-CMA-ES)."""

    def __init__(self, noise: NoiseTable, center: torch.Tensor, sigma, device=None,
                 lowrank: LowRank | None = None):
        self.noise, self.device = noise, torch.device(device or "cpu")
        self.sigma = (sigma.to(self.device, torch.float32) if isinstance(sigma, torch.Tensor)
                      else float(sigma))
        self.center = center.to(self.device, torch.float32)
        self.num_params = center.numel()
        self.lowrank = lowrank  # perturbations of rank r per matrix; None: full rank

    def parts(self, genome: Perturbation) -> tuple[torch.Tensor, int, float] | None:
        if self.lowrank is not None or isinstance(self.sigma, torch.Tensor):
            return None  # slot storage takes one scale per member
        return (self.center, self.noise.offset(genome.seed, self.num_params),
                genome.sign * self.sigma)

    def lowrank_parts(self, genome: Perturbation) -> tuple:
        """``(key, base, factors, scale)``: the centre (this decoder is its key) plus
        ``sign * sigma`` times the low-rank perturbation ``seed``."""
        return (self, self.center, self.lowrank.factors(self.noise, genome.seed, self.device),
                genome.sign * self.sigma)

    def decode(self, genome: Perturbation) -> torch.Tensor:
        eps = perturbation(self.noise, self.lowrank, genome.seed, self.num_params, self.device)
        return self.center + eps * (genome.sign * self.sigma)


PHASES = ("train", "validate", "test")


class Population(Sequence):
    """What ``ask()`` returns: compact genomes plus the means to materialise them.

    ``phase`` is one of ``PHASES``: ``"train"``, ``"validate"`` (Deep GA's elite
    re-evaluation, ES's centre evaluation) or ``"test"`` (the papers' test score:
    ``Optimizer.test_population``); with ``generation`` and a member's index it names the
    evaluation, which is what evaluators seed episodes from. ``budgeted`` is False for
    episodes run for logging only, whose frames do not count towards a run's frame budget.
    """

    def __init__(self, genomes: Sequence, generation: int, phase: str, make_decoder,
                 budgeted: bool = True):
        self.genomes, self.generation, self.phase = list(genomes), generation, phase
        self.budgeted = budgeted
        self._make_decoder = make_decoder  # device -> decoder with .decode(genome)
        self._lock = threading.Lock()
        self._decoders: dict[torch.device, object] = {}

    def __len__(self) -> int:
        return len(self.genomes)

    def __getitem__(self, i):
        return self.genomes[i]

    def decoder(self, device=None):
        device = torch.device(device or "cpu")
        with self._lock:  # one decoder per device, whichever driver thread asks first
            if device not in self._decoders:
                self._decoders[device] = self._make_decoder(device)
            return self._decoders[device]

    def member_params(self, i: int, device=None) -> torch.Tensor:
        """``[D]`` parameters of member ``i`` on ``device``; read-only (it may be cached)."""
        return self.decoder(device).decode(self.genomes[i])

    def member_parts(self, i: int, device=None):
        """``(base, noise table, offset, scale)`` of member ``i`` when it is a perturbation
        of a tensor its decoder holds (see ``ChainDecoder.parts``), else None."""
        decoder = self.decoder(device)
        parts = getattr(decoder, "parts", lambda genome: None)(self.genomes[i])
        if parts is None:
            return None
        base, offset, scale = parts
        return base, decoder.noise.table(decoder.device), offset, scale

    def member_lowrank(self, i: int, device=None) -> tuple | None:
        """``(key, base, factors, scale)`` of member ``i`` when its decoder perturbs at low
        rank (``neuroevo.lowrank``; the slots of ``neuroevo.policy.lowrank`` take it), else
        None."""
        decoder = self.decoder(device)
        if getattr(decoder, "lowrank", None) is None:
            return None
        return decoder.lowrank_parts(self.genomes[i])

    def params(self, device=None, indices=None) -> torch.Tensor:
        """``[P, D]`` float32 parameters of the members (all, or ``indices``) on ``device``."""
        idx = range(len(self)) if indices is None else indices
        return torch.stack([self.member_params(i, device) for i in idx])
