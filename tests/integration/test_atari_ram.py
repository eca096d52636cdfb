"""The Atari RAM behaviour (``env.behaviour=ram``): each env's replica emulator against
ale-py's own vector env, and novelty search on Atari through the engine."""

import ale_py
import numpy as np
import pytest

from neuroevo import cli, train
from neuroevo.checkpoint import RunDir
from neuroevo.envs.atari import AtariConfig, AtariPool, action_count
from neuroevo.errors import StateError

# kung_fu_master and crossbow start differently with each seed of ale-py's vector env,
# crossbow's ROM plays start frames of its own, pong has no FIRE
GAMES = ["frostbite", "kung_fu_master", "crossbow", "pong", "breakout"]


def _area(n_in: int, n_out: int) -> np.ndarray:
    """``[n_out, n_in]`` weights of an area resize (OpenCV's INTER_AREA, in floats)."""
    scale, weights = n_in / n_out, np.zeros((n_out, n_in))
    for j in range(n_out):
        lo, hi = j * scale, (j + 1) * scale
        for i in range(int(lo), int(np.ceil(hi))):
            weights[j, i] = max(0.0, min(hi, i + 1) - max(lo, i)) / scale
    return weights


@pytest.mark.parametrize("game", GAMES)
def test_a_replicas_reset_state_is_a_rom_load_with_the_episodes_seed(game):
    """What a replica restores in place of a ROM load is, byte for byte, the state that
    ALE's own load with that ``random_seed`` saves, its RNG included."""
    pool = AtariPool(AtariConfig(game, ram=True), 1, 1)
    for seed in (0, 1, 7, 99_999, 2**31 - 1):
        fresh = ale_py.ALEInterface()
        fresh.setInt("random_seed", seed)
        fresh.loadROM(ale_py.roms.get_rom_path(game))
        assert pool.replicas.loaded.seeded(seed) == fresh.cloneState(include_rng=True).serialize()


@pytest.mark.parametrize("game", GAMES)
def test_each_replica_starts_on_the_vector_envs_screen(game):
    """After a seeded reset (ROM seed, FIRE, the vector env's own no-op count) a replica's
    screen, resized as ale-py resizes it, is the vector env's first frame: at most one
    grey level of rounding apart."""
    pool = AtariPool(AtariConfig(game, ram=True), 4, 1)
    obs = pool.reset(np.ones(4, dtype=bool), np.array([3, 17, 2**30, 99]))
    rows, cols = _area(210, 84), _area(160, 84)
    for env in range(4):
        screen = pool.replicas.envs[env].getScreenGrayscale().astype(np.float64)
        diff = np.abs(np.rint(rows @ screen @ cols.T) - obs[env, -1])
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3


def _episodes(game: str, num_envs: int, seeds, sticky: float = 0.0, cap: int = 2000):
    """Random play of one episode per seed, every env in step with its replica (the pool
    checks each step's reward and lives); each episode's final RAM and return."""
    config = AtariConfig(game, sticky_actions=sticky, ram=True, fire_on_life_loss=True,
                         fire_on_frozen_screen=30, episode_cap=None)
    pool, n = AtariPool(config, num_envs, 1), action_count(game)
    seeds, rams, returns = list(seeds), {}, {}
    running = [seeds.pop(0) if seeds else None for _ in range(num_envs)]
    pool.reset(np.ones(num_envs, dtype=bool), np.array([s or 0 for s in running]))
    total, steps = np.zeros(num_envs), np.zeros(num_envs, dtype=int)
    while any(s is not None for s in running):
        # each episode's actions depend on its seed and step alone, not on its env
        actions = [np.random.default_rng([s or 0, t]).integers(n)
                   for s, t in zip(running, steps, strict=True)]
        pool.send(np.array(actions, dtype=np.int32))
        _, rewards, done = pool.recv()
        total, steps = total + rewards, steps + 1
        done |= steps >= cap
        ended = np.flatnonzero(done & np.array([s is not None for s in running]))
        if not len(ended):
            continue
        for env, ram in zip(ended, pool.behaviour(ended), strict=True):
            rams[running[env]], returns[running[env]] = ram, total[env]
            running[env] = seeds.pop(0) if seeds else None
        fresh = np.zeros(num_envs, dtype=bool)
        fresh[[e for e in ended if running[e] is not None]] = True
        if fresh.any():
            pool.reset(fresh, np.array([running[e] for e in np.flatnonzero(fresh)]))
            total[fresh], steps[fresh] = 0, 0
    return rams, returns


@pytest.mark.parametrize("game, sticky", [("frostbite", 0.0), ("kung_fu_master", 0.0),
                                          ("crossbow", 0.0), ("breakout", 0.25)])
def test_replicas_keep_step_for_whole_episodes_and_the_ram_is_the_episodes(game, sticky):
    """Whole random episodes (sticky actions too: ALE draws them from the seeded RNG that
    the replica reseeds alike) never lose step, and an episode's final RAM depends on its
    seed and actions alone: one env or three, in any order."""
    seeds = [11, 12, 13, 14]
    one, returns_one = _episodes(game, 1, seeds, sticky)
    three, returns_three = _episodes(game, 3, seeds[::-1], sticky)
    for s in seeds:
        assert np.array_equal(one[s], three[s]) and returns_one[s] == returns_three[s]
        assert one[s].shape == (128,) and one[s].dtype == np.float32
    assert len({one[s].tobytes() for s in seeds}) == len(seeds)  # four different endings


def test_a_replica_that_loses_step_stops_the_run():
    """The check the tests above rely on fails where it should: a replica whose game was
    restarted behind the pool's back has more lives than its env once that loses one."""
    pool = AtariPool(AtariConfig("breakout", ram=True, fire_on_life_loss=True), 1, 1)
    pool.reset(np.ones(1, dtype=bool), np.array([5]))
    noop = np.zeros(1, dtype=np.int32)
    lives = pool.replicas.lives[0]
    while pool.replicas.lives[0] == lives:
        pool.send(noop)
        pool.recv()
    pool.replicas.envs[0].reset_game()  # back to all its lives
    pool.send(noop)
    with pytest.raises(StateError, match="the RAM replica of env 0 lost step with ale-py's "
                                         r"vector env \(reward 0.0 against 0, lives 5 against"):
        pool.recv()


def test_a_pool_without_replicas_has_no_ram():
    pool = AtariPool(AtariConfig("pong"), 1, 1)
    pool.reset(np.ones(1, dtype=bool), np.array([0]))
    with pytest.raises(StateError, match=r"keeps no RAM; make it with env\.behaviour=ram$"):
        pool.behaviour(np.array([0]))


def test_novelty_search_on_atari_measures_the_ram_on_any_layout():
    """NS-ES on frostbite: ``auto`` resolves to ``ram`` (written in config.yaml), the
    archive holds 128-byte RAMs, and the run is the same on 1 and 2 subsets."""
    common = dict(algo__name="nses", env__game="frostbite", algo__population=4,
                  algo__centres=2, engine__device="cpu", budget__generations=2,
                  env__episode_cap=100, env__test_episode_cap=100, algo__test_episodes=1,
                  seed=3)
    runs = [train(**common, **layout) for layout in ({"engine__subsets": 1},
                                                     {"engine__subsets": 2,
                                                      "engine__slots": 2})]
    assert runs[0].config.env.behaviour == "ram"
    rows = [[{k: v for k, v in r.items() if k not in ("wall_time", "fps", "timings",
                                                      "occupancy")}
             for r in run.history] for run in runs]
    assert rows[0] == rows[1]
    archive = runs[0].optimizer.state.archive
    assert archive.shape == (4, 128) and ((archive >= 0) & (archive <= 255)).all()
    assert len({tuple(r.tolist()) for r in archive}) > 1


def test_novelty_search_on_atari_resumes_bit_for_bit(tmp_path, monkeypatch):
    """A replica keeps nothing from one episode to the next (each restarts from its seed),
    so NSR-ES on frostbite resumed from generation 1 is the run made in one go, archive
    included."""
    monkeypatch.chdir(tmp_path)
    run = ["run", "nsres", "--game", "frostbite", "--population", "4", "--episode-cap", "100",
           "--set", "env.test_episode_cap=100", "--set", "algo.test_episodes=1",
           "--set", "algo.centres=2", "--seed", "1", "--no-progress"]
    assert cli.main([*run, "--generations", "1", "--run-dir", "a"]) == 0
    assert cli.main(["resume", "a", "--generations", "3", "--no-progress"]) == 0
    assert cli.main([*run, "--generations", "3", "--run-dir", "b"]) == 0
    saved = [RunDir(str(tmp_path / d)).load() for d in "ab"]
    skip = {"wall_time", "fps", "timings", "occupancy", "test_score", "test_score_std",
            "test_episodes", "test_frames"}  # a's first session tested after generation 0
    rows = [[{k: v for k, v in r.items() if k not in skip} for r in run["history"]]
            for run in saved]
    assert rows[0] == rows[1] and len(rows[0]) == 3
    archives = [run["optimizer"]["state"]["archive"] for run in saved]
    assert archives[0].shape == (5, 128) and archives[0].equal(archives[1])


@pytest.mark.parametrize("argv, message", [
    (["run", "nses", "--env", "Hopper-v5", "--set", "env.behaviour=ram"],
     "env.behaviour=ram reads the RAM of Atari games, not env.id='Hopper-v5'; use "
     "env.behaviour=auto"),
    (["run", "es", "--game", "frostbite", "--set", "env.behaviour=ram"],
     "env.behaviour is set but not used: the es algorithm reads no behaviour"),
])
def test_a_ram_behaviour_where_none_is_read_is_one_line(argv, message, tmp_path, monkeypatch,
                                                      capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([*argv, "--run-dir", "r"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err
    assert not (tmp_path / "r").exists()
