"""What a sweep explores, checked before anything runs: the swept keys and their values, the
seeds, the budget, the search, the scheduler and the metric (``Plan``). Every point of the
grid (and each range's ends) passes the checks a run makes of its config, its optimizer's
included, so a bad value is one line here rather than a traceback from inside Ray. Pure:
Ray Tune's search-space objects are made from a ``Plan`` in ``neuroevo.sweep.tuner``.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field, replace

from neuroevo.build import optimizer_of
from neuroevo.config import (
    Config,
    apply_sets,
    field_types,
    from_dict,
    keys,
    load,
    override,
    params_of,
    to_dict,
    value_of,
)
from neuroevo.errors import ConfigError, UnknownName
from neuroevo.metrics import METRICS
from neuroevo.optim import ALGORITHMS

SEARCHES = ("grid", "random", "optuna")
SCHEDULERS = ("fifo", "asha", "pbt")
RANGE_KINDS = ("lin", "uniform", "log", "int")  # uniform: lin's older name
# Row keys every generation of every run has (``loop.one_generation``); the others depend on
# the algorithm and the config (``every_row``).
ALWAYS = ("generation", "frames", "episodes", "wall_time", "fitness_max", "fitness_mean",
          "fitness_min", "fps", "occupancy", "episode_steps_mean", "generation_frames",
          "best_fitness")
TEST_KEYS = ("test_score", "test_score_std", "test_episodes", "test_frames")


@dataclass(frozen=True)
class Range:
    key: str
    kind: str  # one of RANGE_KINDS
    lo: float
    hi: float


@dataclass(frozen=True)
class Plan:
    """One sweep: every trial is ``algo`` with ``config`` (the overrides of a YAML file, read
    once: editing the file changes no trial of a running or resumed sweep), the
    fixed ``sets``, one value of each swept key and one of ``seeds``, for ``generations``
    or ``frames``. ``grid`` keys take each listed value; ``ranges`` are drawn by the search
    (``samples`` points per seed). ``metric`` is the score the scheduler and the summary
    rank trials by (``mode``: max or min)."""

    algo: str
    config: dict | None
    sets: tuple[str, ...]
    grid: tuple[tuple[str, tuple], ...]
    ranges: tuple[Range, ...]
    seeds: tuple[int, ...]
    generations: int | None
    frames: int | None
    search: str = "grid"
    samples: int = 1
    scheduler: str = "fifo"
    metric: str = ""
    mode: str = "max"
    pbt_interval: int = 0
    grace_period: int = 0  # ASHA's first rung, in the budget's unit (0: budget / 9)
    sweep_seed: int = 0
    swept: tuple[str, ...] = field(default=())

    def base(self) -> Config:
        """The config every trial starts from, before its swept values and seed."""
        cfg = from_dict(copy.deepcopy(self.config)) if self.config else Config()
        override(cfg, "algo.name", self.algo)
        apply_sets(cfg, self.sets)
        return cfg

    def trial_config(self, values: dict, seed: int) -> Config:
        """The config of one trial: ``values`` of the swept keys (text or numbers)."""
        cfg = self.base()
        for key, value in values.items():
            override(cfg, key, value)
        override(cfg, "seed", seed)
        override(cfg, "budget.generations", self.generations or 0)
        override(cfg, "budget.frames", self.frames or 0)
        return cfg

    @property
    def time_attr(self) -> str:
        """What ASHA's rungs count: generations, or frames when the budget is given in
        frames only (PBT's interval always counts generations)."""
        return "generations" if self.generations is not None else "frames"

    @property
    def budget(self) -> int:
        return self.generations if self.generations is not None else self.frames

    def to_json(self) -> dict:
        """What must not change between a sweep and its resume (``OUT/sweep.json``)."""
        return {"algo": self.algo, "config": self.config, "set": list(self.sets),
                "grid": {k: list(v) for k, v in self.grid},
                "ranges": [[r.key, r.kind, r.lo, r.hi] for r in self.ranges],
                "seeds": list(self.seeds), "generations": self.generations,
                "frames": self.frames, "search": self.search, "samples": self.samples,
                "scheduler": self.scheduler, "metric": self.metric, "mode": self.mode,
                "pbt_interval": self.pbt_interval, "grace_period": self.grace_period,
                "sweep_seed": self.sweep_seed}


def parse_grid(spec: str) -> tuple[str, tuple]:
    """``key=v1,v2,...`` -> the key and its values, typed as the config field."""
    if "=" not in spec or not spec.split("=", 1)[1]:
        raise ConfigError(f"--grid takes key=v1,v2,..., got {spec!r}")
    key, values = spec.split("=", 1)
    return key, tuple(typed(key, v) for v in values.split(","))


def parse_range(spec: str) -> Range:
    """``key=lin|log|int:lo:hi`` -> a ``Range`` (``log`` needs lo > 0)."""
    try:
        key, rest = spec.split("=", 1)
        kind, lo, hi = rest.split(":")
        lo, hi = float(lo), float(hi)
    except ValueError:
        raise ConfigError(f"--range takes key=lin|log|int:lo:hi, got {spec!r}") from None
    if kind not in RANGE_KINDS:
        raise ConfigError(f"--range kind must be lin, log or int, got {kind!r} in {spec!r}")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ConfigError(f"--range needs finite lo < hi, got {spec!r}")
    if kind == "log" and lo <= 0:
        raise ConfigError(f"--range log needs lo > 0, got {spec!r}; use lin for ranges "
                          "through zero")
    if kind == "int" and not (lo.is_integer() and hi.is_integer()):
        raise ConfigError(f"--range int needs whole lo and hi, got {spec!r}")
    if key not in keys():
        raise UnknownName("config key", key, keys())
    types = set(field_types(key))
    if not types <= {int, float}:
        raise ConfigError(f"--range {key}: {key} is not a number; sweep it with --grid "
                          f"{key}=v1,v2")
    if types == {int} and kind != "int":
        raise ConfigError(f"--range {key} takes whole numbers: write {key}=int:lo:hi")
    return Range(key, "lin" if kind == "uniform" else kind, lo, hi)


def typed(key: str, text: str):
    """``text`` as the value config key ``key`` takes (the trial names show numbers)."""
    cfg = Config()
    override(cfg, key, text)
    return value_of(cfg, key)


def parse_seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise ConfigError(f"--seeds takes integers like 0,1,2, got {text!r}") from None
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds takes distinct non-negative integers, got {text!r}")
    return seeds


def mutable(algo: str) -> tuple[str, ...]:
    """The keys PBT may change in the middle of a run of ``algo``: they shape no optimizer
    state, so a trial can continue from another trial's checkpoint with new values
    (Jaderberg et al. 2017, explore). The algorithm names its own (``Algorithm.pbt``)."""
    return (*(f"algo.{k}" for k in ALGORITHMS[algo].pbt), "env.action_noise")


def every_row(cfg: Config) -> set[str]:
    """The metric keys that every row of a run of ``cfg`` reports (schedulers and Optuna
    read the metric at every generation)."""
    out = set(ALWAYS) | {m.name for m in ALGORITHMS[cfg.algo.name].optimizer.metrics}
    if params_of(cfg).logging_episodes() > 0:
        out |= {"center_score", "eval_frames"}
    if cfg.algo.test_episodes > 0 and cfg.algo.test_every == 1:
        out |= set(TEST_KEYS)
    return out


def default_metric(cfg: Config) -> str:
    """The algorithm's score: the elite's validated score, or the centre's, else the best
    training episode."""
    rows = every_row(cfg)
    for key in ("elite_score", "center_score"):
        if key in rows:
            return key
    return "fitness_max"


def make_plan(algo: str, *, config: str | None = None, sets=(), grid=(), ranges=(),
              seeds: str = "0", generations: int | None = None, frames: int | None = None,
              search: str | None = None, samples: int | None = None,
              scheduler: str = "fifo", metric: str | None = None, mode: str = "max",
              pbt_interval: int | None = None, grace_period: int | None = None,
              sweep_seed: int = 0) -> Plan:
    """A checked ``Plan`` from the command line's options (``grid``: ``key=v1,v2`` texts,
    ``ranges``: ``key=lin|log|int:lo:hi`` texts): every swept key and value is a valid
    setting the run uses, and the search, scheduler and metric fit together. Parsed
    (``_parse``), checked (``_check``, then ``check_points``), then scheduled
    (``_schedule``: PBT's interval, ASHA's grace period).

    >>> make_plan("es", sets=["env.id=CartPole-v1"], grid=["algo.sigma=0.01,0.05"],
    ...           generations=5).metric
    'center_score'
    """
    grid, ranges, swept = _parse(grid, ranges, generations, frames, samples)
    search = search or ("random" if samples is not None else "grid")
    _check(algo, swept, ranges, search, samples, scheduler, mode, pbt_interval, grace_period)
    plan = Plan(algo, config and to_dict(load(config)), tuple(sets), grid, ranges,
                parse_seeds(seeds), generations,
                frames, search, samples or 1, scheduler, metric or "", mode,
                pbt_interval or 0, grace_period or 0, sweep_seed, tuple(swept))
    check_points(plan)  # bad values and combinations fail here, before Ray starts
    cfg = plan.trial_config(next(iter(points(plan))), plan.seeds[0])
    plan = _schedule(plan, cfg, generations, pbt_interval, grace_period)
    return replace(plan, metric=check_metric(plan, cfg))


def _parse(grid, ranges, generations, frames, samples) -> tuple[tuple, tuple, list[str]]:
    """The budget and the number of points checked; the grid and ranges parsed; the swept
    keys, each once and none that a sweep sets another way."""
    if generations is None and frames is None:
        raise ConfigError("give each trial a budget: --generations N or --frames N")
    for flag, value in (("--generations", generations), ("--frames", frames)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} takes a budget >= 1, got {value}")
    if samples is not None and samples < 1:
        raise ConfigError(f"--random / --samples take the number of points, >= 1, got "
                          f"{samples}")
    grid = tuple(parse_grid(g) for g in grid)
    ranges = tuple(parse_range(r) for r in ranges)
    swept = [k for k, _ in grid] + [r.key for r in ranges]
    if len(set(swept)) != len(swept):
        raise ConfigError(f"a key is swept twice: {', '.join(swept)}; give each key once")
    for key in swept:
        if key == "seed" or key.startswith("budget."):
            raise ConfigError(f"{key} is not swept with --grid/--range: give --seeds, "
                              "--generations or --frames")
    return grid, ranges, swept


def _check(algo, swept, ranges, search, samples, scheduler, mode, pbt_interval, grace_period
           ) -> None:
    """The search, the scheduler and their options fit together and fit what is swept."""
    if search not in SEARCHES:
        raise ConfigError(f"--search takes grid, random or optuna, got {search!r}")
    if ranges and search == "grid":
        raise ConfigError("--range goes with --random N (or --search random|optuna "
                          "--samples N): a grid takes --grid key=v1,v2")
    if search != "grid" and not ranges:
        raise ConfigError(f"--search {search} draws from --range key=lin|log|int:lo:hi; give "
                          "at least one --range")
    if search == "grid" and samples is not None:
        raise ConfigError("--samples goes with --search random or optuna; a grid runs each "
                          "point once per seed")
    if not swept:
        raise ConfigError("give the values to sweep: --grid key=v1,v2 or --random N "
                          "--range key=lin|log|int:lo:hi")
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"--scheduler takes fifo, asha or pbt, got {scheduler!r}")
    if mode not in ("max", "min"):
        raise ConfigError(f"--mode takes max or min, got {mode!r}")
    if scheduler == "pbt":
        if not ranges:
            raise ConfigError("--scheduler pbt perturbs the --range keys and there are none; "
                              "give one, e.g. --range algo.sigma=log:0.005:0.1")
        fixed = [r.key for r in ranges if r.key not in mutable(algo)]
        if fixed:
            raise ConfigError(f"--scheduler pbt cannot change {fixed[0]} in the middle of a "
                              f"{algo} run; PBT perturbs {', '.join(mutable(algo))}")
    if scheduler == "pbt" and search == "optuna":
        raise ConfigError("--scheduler pbt explores the --range keys itself; use --search "
                          "random with it, or --search optuna with fifo or asha")
    if pbt_interval is not None and scheduler != "pbt":
        raise ConfigError("--pbt-interval goes with --scheduler pbt")
    if grace_period is not None and scheduler != "asha":
        raise ConfigError("--grace-period goes with --scheduler asha")


def _schedule(plan: Plan, cfg: Config, generations, pbt_interval, grace_period) -> Plan:
    """``plan`` with PBT's perturbation interval or ASHA's grace period, checked against
    its budget and a trial's config ``cfg``."""
    if plan.scheduler == "pbt":
        if cfg.net.vbn:
            raise ConfigError("--scheduler pbt exploits by continuing another trial's network, "
                              "and a VBN network's reference batch comes from its own seed; "
                              "use net.vbn=false or --scheduler asha")
        if pbt_interval is not None and pbt_interval < 1:
            raise ConfigError(f"--pbt-interval takes generations >= 1, got {pbt_interval}")
        if generations is None and pbt_interval is None:
            raise ConfigError("--scheduler pbt with a --frames budget needs --pbt-interval N "
                              "(generations between perturbations)")
        interval = pbt_interval or max(1, generations // 10)
        if generations is not None and interval >= generations:
            raise ConfigError(f"--pbt-interval {interval} leaves no perturbation in a budget "
                              f"of {generations} generations; give a smaller one")
        plan = replace(plan, pbt_interval=interval)
    if plan.scheduler == "asha":
        grace = grace_period or max(1, plan.budget // 9)
        if grace < 1 or grace >= plan.budget:
            raise ConfigError(f"--grace-period {grace} leaves ASHA no rung below the budget "
                              f"of {plan.budget} {plan.time_attr}; give a smaller one")
        plan = replace(plan, grace_period=grace)
    return plan


def check_metric(plan: Plan, cfg: Config) -> str:
    """The metric ``plan`` ranks by: known, reported by this algorithm, and at every
    generation where a scheduler or Optuna reads it."""
    metric = plan.metric or default_metric(cfg)
    known = [m.name for m in (*METRICS, *ALGORITHMS.metrics()) if m.name != "timings"]
    if metric not in known:
        raise UnknownName("metric", metric, known)
    rows = every_row(cfg)
    if metric in rows:
        return metric
    if metric in TEST_KEYS and cfg.algo.test_episodes == 0:
        raise ConfigError(f"--metric {metric} needs a test phase: add --set "
                          "algo.test_episodes=N")
    reader = ("--scheduler " + plan.scheduler if plan.scheduler != "fifo" else
              "--search optuna" if plan.search == "optuna" else "")
    if metric in TEST_KEYS and reader:
        raise ConfigError(f"{reader} reads --metric {metric} every generation; add --set "
                          "algo.test_every=1, or rank by another metric")
    if metric not in TEST_KEYS:
        raise ConfigError(f"{plan.algo} runs with this config do not report {metric}; rank by "
                          f"one of {', '.join(sorted(rows))}")
    return metric


def points(plan: Plan):
    """The points whose trial configs are checked: every point of the grid (the product of
    its values) with each range at its low end, then each range's high end. A range's
    inside is not checked: most checks are bounds, which its ends cover, but not all (an
    int range of an even-only population draws odd values too)."""
    lows = {r.key: _value(r, r.lo) for r in plan.ranges}
    grid = [key for key, _ in plan.grid]
    for values in itertools.product(*(values for _, values in plan.grid)):
        yield {**dict(zip(grid, values, strict=True)), **lows}
    first = {key: values[0] for key, values in plan.grid}
    for r in plan.ranges:
        yield {**first, **lows, r.key: _value(r, r.hi)}


def check_points(plan: Plan) -> None:
    """Refuse a plan with a point that a run would refuse: its config (``build.resolve``)
    and its optimizer's constructor (population parity, archive sizes, ...), through
    ``build.optimizer_of``, which builds no policy on a device and no evaluator (a gym env
    is made once to read its spaces). The error names the swept values that cause it
    (``--grid algo.population=9: ...``)."""
    for values in points(plan):
        error = _refusal(plan, values)
        if error is not None:
            raise ConfigError(f"{_blame(plan, values, error)}{error}") from None


def _refusal(plan: Plan, values: dict) -> str | None:
    """What a run of the trial with ``values`` would refuse, or None."""
    try:
        optimizer_of(plan.trial_config(values, plan.seeds[0]))
    except ConfigError as e:
        return str(e)
    return None


def _blame(plan: Plan, values: dict, error: str) -> str:
    """The prefix naming who causes ``error`` at ``values``: nothing when the fixed settings
    alone do (the swept keys at their defaults), else the first swept value that does it
    alone, else every swept value of the point (a combination)."""
    if _refusal(plan, {}) == error:
        return ""
    for key, value in values.items():
        if _refusal(plan, {key: value}) == error:
            return f"{_flag(plan, key, value)}: "
    return " with ".join(_flag(plan, k, v) for k, v in values.items()) + ": "


def _flag(plan: Plan, key: str, value) -> str:
    r = next((r for r in plan.ranges if r.key == key), None)
    if r is None:
        return f"--grid {key}={_text(value)}"
    return (f"--range {key}={r.kind}:{_text(_value(r, r.lo))}:{_text(_value(r, r.hi))} "
            f"(at {_text(value)})")


def _text(value) -> str:
    """``value`` as the command line writes it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _value(r: Range, x: float):
    return int(x) if r.kind == "int" else x
