"""The algorithm registry: an algorithm registered from this module alone, no other file
changed, runs everywhere the built-in ones run: ``neuroevo.train``, ``neuroevo run`` with
its checkpoint and resume, ``play``, ``plot`` and sweep key checks; and the config reads its
keys from the registry."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from neuroevo import cli, train
from neuroevo.checkpoint import RunDir
from neuroevo.config import Config, check, keys, override
from neuroevo.errors import ConfigError, UnknownName
from neuroevo.genomes import SEED_BOUND, Perturbation
from neuroevo.metrics import Metric
from neuroevo.optim import ALGORITHMS, Algorithm, Params, Start, param
from neuroevo.optim.base import CenterSearch
from neuroevo.play import play
from neuroevo.sweep.space import make_plan


@dataclass
class OnePlusState:
    center: torch.Tensor
    parent_fitness: float = float("-inf")
    generation: int = 0
    best_fitness: float = float("-inf")


class OnePlusLambda(CenterSearch):
    """(1+lambda)-ES (Rechenberg; Schwefel): lambda children of the parent, and the best of
    parent and children becomes the next parent."""

    name = "toy_one_plus"
    metrics = (Metric("parent_fitness", "toy: the parent's fitness"),)

    def __init__(self, num_params, *, center, population_size, step, seed):
        super().__init__(num_params, population_size, seed, None, "raise")
        self.step = step
        self.state = OnePlusState(center=center.clone())

    def _scale(self) -> float:
        return self.step

    def _ask(self):
        seeds = self.rng().integers(0, SEED_BOUND, self.population_size)
        return self._population([Perturbation(int(k), 1) for k in seeds],
                                self.state.generation, "train")

    def _tell(self, pop, fitness):
        j = int(np.argmax(fitness))
        if fitness[j] > self.state.parent_fitness:
            self.state.center = pop.member_params(j).clone()
            self.state.parent_fitness = float(fitness[j])
        return {"parent_fitness": self.state.parent_fitness}, True


@dataclass(frozen=True)
class ToyParams(Params):
    step: float = param(0.05, "> 0", lambda v: v > 0)  # mutation std


def from_config(p: ToyParams, start: Start) -> OnePlusLambda:
    return OnePlusLambda(start.num_params, center=start.initial(),
                         population_size=start.population, step=p.step, seed=start.seed)


TOY = Algorithm(OnePlusLambda, ToyParams, from_config, pbt=("step",), doc="a toy (1+lambda)-ES")
CARTPOLE = ["--env", "CartPole-v1", "--population", "6", "--device", "cpu", "--no-progress",
            "--set", "algo.test_episodes=2", "--set", "env.episode_cap=50",
            "--set", "env.test_episode_cap=50"]


@pytest.fixture
def toy():
    ALGORITHMS.register(TOY)
    try:
        yield TOY
    finally:
        ALGORITHMS.unregister(TOY.name)


def test_a_registered_algorithm_trains_through_neuroevo_train(toy):
    result = train(algo__name=toy.name, algo__step=0.1, env__id="CartPole-v1",
                   algo__population=6, env__episode_cap=50, algo__test_episodes=0,
                   engine__device="cpu", budget__generations=3)
    rows = result.history
    assert [r["generation"] for r in rows] == [0, 1, 2]
    # its own metric reaches the rows: the parent never gets worse, as (1+lambda) keeps it
    parents = [r["parent_fitness"] for r in rows]
    assert parents == sorted(parents) and parents[-1] == max(r["fitness_max"] for r in rows)
    assert result.config.algo.step == 0.1 and result.optimizer.step == 0.1


def test_it_runs_resumes_bit_for_bit_plays_and_plots_through_the_cli(toy, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", toy.name, *CARTPOLE, "--generations", "2", "--run-dir", "a"]) == 0
    assert cli.main(["resume", "a", "--generations", "4", "--no-progress"]) == 0
    assert cli.main(["run", toy.name, *CARTPOLE, "--generations", "4", "--run-dir", "b"]) == 0
    a, b = (RunDir(str(tmp_path / d)) for d in "ab")
    # timing aside, and the test phase that ended run a's first session (logging only)
    strip = ("wall_time", "fps", "timings", "occupancy", "test_score", "test_score_std",
             "test_episodes", "test_frames")
    rows = [[{k: v for k, v in r.items() if k not in strip} for r in d.load()["history"]]
            for d in (a, b)]
    assert rows[0] == rows[1] and len(rows[0]) == 4
    scores, _ = play(a, episodes=2)
    assert len(scores) == 2
    assert cli.main(["plot", "a", "-o", "a.png", "--y", "parent_fitness"]) == 0
    assert (tmp_path / "a.png").stat().st_size > 0


def test_its_keys_are_config_keys_and_the_others_refuse_it(toy):
    assert "algo.step" in keys()
    cfg = Config()
    override(cfg, "algo.name", toy.name)
    override(cfg, "algo.lr", "0.1")  # OpenAI-ES's key
    with pytest.raises(ConfigError, match=r"algo.lr is set but not used: the toy_one_plus "
                                          r"algorithm does not use it \(es, pgpe, nses, nsres, nsraes use it\)"):
        check(cfg)
    cfg = Config()
    override(cfg, "algo.step", "0.1")  # the toy's key on the default algorithm, ga
    with pytest.raises(ConfigError, match=r"the ga algorithm does not use it \(toy_one_plus "):
        check(cfg)
    cfg = Config()
    override(cfg, "algo.name", toy.name)
    override(cfg, "algo.step", "-1")
    with pytest.raises(ConfigError, match=r"algo.step must be > 0, got -1.0"):
        check(cfg)


def test_sweeps_check_its_keys_and_pbt_perturbs_what_it_names(toy):
    plan = make_plan(toy.name, sets=["env.id=CartPole-v1"], grid=["algo.step=0.01,0.1"],
                     generations=5)
    assert plan.metric == "fitness_max"  # no centre episodes: the best training episode
    with pytest.raises(ConfigError, match=r"algo.sigma is set but not used"):
        make_plan(toy.name, sets=["env.id=CartPole-v1"], grid=["algo.sigma=0.01,0.1"],
                  generations=5)
    make_plan(toy.name, sets=["env.id=CartPole-v1"], ranges=["algo.step=log:0.01:0.1"],
              samples=2, scheduler="pbt", generations=5)
    with pytest.raises(ConfigError, match=r"PBT perturbs algo.step, env.action_noise"):
        make_plan(toy.name, sets=["env.id=CartPole-v1"], ranges=["algo.population=int:4:8"],
                  samples=2, scheduler="pbt", generations=5)


def test_a_name_taken_or_a_key_of_two_types_is_refused(toy):
    with pytest.raises(ConfigError, match="registered already"):
        ALGORITHMS.register(TOY)

    @dataclass(frozen=True)
    class Clash(Params):
        sigma: int = param(1, ">= 1", lambda v: v >= 1)  # float in ga and es

    class Other(OnePlusLambda):
        name = "toy_clash"

    with pytest.raises(ConfigError, match=r"algo.sigma is <class 'float'> in ga, es, sepcma, "
                                          r"gans, mapelites, nses, nsres, nsraes but <class 'int'> in toy_clash"):
        ALGORITHMS.register(Algorithm(Other, Clash, from_config))
    with pytest.raises(UnknownName, match=r"unknown algorithm 'toy_one_pls'; did you mean "
                                          r"'toy_one_plus'"):
        ALGORITHMS["toy_one_pls"]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_registered_algorithm_gives_the_same_run_on_1_and_2_workers(name):
    timing = ("wall_time", "fps", "timings", "occupancy")
    # novelty search reads a behaviour: here the Python API's, of the final observation
    behaviour = (lambda obs: obs[:2]) if ALGORITHMS[name].optimizer.uses_behaviour else None
    grid = (dict(algo__grid_low="-1,-1", algo__grid_high="1,1") if name == "mapelites"
            else {})  # MAP-Elites' grid has no default: over the behaviour's range
    runs = [[{k: v for k, v in r.items() if k not in timing} for r in train(
        algo__name=name, env__id="CartPole-v1", algo__population=8, env__episode_cap=60,
        algo__test_episodes=2, engine__device="cpu", engine__workers=workers,
        budget__generations=3, behaviour=behaviour, **grid).history] for workers in (1, 2)]
    assert runs[0] == runs[1] and len(runs[0]) == 3


def test_a_run_directory_from_before_the_registry_resumes(tmp_path, monkeypatch):
    """Before the registry a config.yaml held every algo key, those its algorithm ignores at
    their defaults (ES: truncation 0, elite_candidates 5); they are read as unused."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "es", *CARTPOLE, "--generations", "1", "--run-dir", "a"]) == 0
    path = tmp_path / "a" / "config.yaml"
    text = path.read_text()
    assert "truncation: null" in text
    path.write_text(text.replace("truncation: null", "truncation: 0").replace(
        "elite_candidates: null", "elite_candidates: 5"))
    assert cli.main(["resume", "a", "--generations", "2", "--no-progress"]) == 0
    path.write_text(path.read_text().replace("truncation: null", "truncation: 3"))
    assert cli.main(["resume", "a", "--generations", "3", "--no-progress"]) == 2  # not legacy


def test_a_crafted_algorithm_name_in_a_run_directory_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "ga", *CARTPOLE, "--generations", "1", "--run-dir", "a"]) == 0
    path = tmp_path / "a" / "config.yaml"
    path.write_text(path.read_text().replace("  name: ga\n", "  name: [1]\n"))
    capsys.readouterr()
    assert cli.main(["resume", "a", "--generations", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the config differs from the run its checkpoint saved" in err[0]
