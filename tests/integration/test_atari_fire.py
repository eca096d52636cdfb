"""``env.fire_on_life_loss`` and ``env.fire_on_frozen_screen`` against ale-py's own vector
env, driven by hand."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv

from neuroevo import GA, NoiseTable
from neuroevo.checkpoint import RunDir
from neuroevo.config import Config, EnvConfig, identity
from neuroevo.engine import PipelinedEvaluator
from neuroevo.envs.atari import AtariConfig, AtariPool, fire_action
from neuroevo.envs.spec import env_spec
from neuroevo.errors import CheckpointError
from neuroevo.evaluation import evaluate_one
from neuroevo.policy.batched import BatchedPolicy
from neuroevo.policy.nets import build_template

# what AtariPool passes to ale-py besides the game and the protocol's numbers
PROTOCOL = dict(batch_size=0, repeat_action_probability=0.0, frameskip=4, noop_max=30,
                reward_clipping=False, episodic_life=False, use_fire_reset=True, maxpool=True,
                grayscale=True, img_height=84, img_width=84, stack_num=4)


def noop_steps(config: AtariConfig, cap: int = 5000) -> tuple[int, bool]:
    """Agent steps of a NOOP policy's episode, cut at ``cap``, and whether it ended by
    itself."""
    pool = AtariPool(config, 1, num_threads=1)
    pool.reset(np.ones(1, bool), [11])
    steps, done = 0, False
    while steps < cap and not done:
        pool.send(np.zeros(1, dtype=np.int32))
        done = bool(pool.recv()[2][0])
        steps += 1
    pool.close()
    return steps, done


def test_a_noop_policy_loses_its_lives_with_the_setting_and_idles_without():
    steps, over = noop_steps(AtariConfig("breakout", fire_on_life_loss=True))
    assert over and steps < 500  # five lives, FIRE after each lost one: game over
    steps, over = noop_steps(AtariConfig("breakout", fire_on_life_loss=False))
    assert not over and steps == 5000  # the ball never comes back: a frozen screen to the cap


def test_fire_action_is_read_from_the_action_set():
    assert fire_action("breakout") == 1  # NOOP, FIRE, RIGHT, LEFT
    assert fire_action("breakout", full_action_space=True) == 1
    assert fire_action("freeway") is None  # NOOP, UP, DOWN: nothing to press


def by_hand(game: str, seeds: list[int], actions: np.ndarray,
            restart: dict[int, tuple[int, int]], limit: int = 0):
    """The reference: one ale-py vector env per pool env; FIRE pressed by hand on the step
    after ``info["lives"]`` dropped while the game goes on and, with ``limit``, after
    ``limit`` steps whose newest frame equals the one before (the count starting again after
    each press). ``restart[t] = (env, seed)`` starts env's episode again before step ``t``."""
    fire_index = fire_action(game)
    envs = [AtariVectorEnv(game, 1, num_threads=1, **PROTOCOL) for _ in seeds]
    lives, fire, still, newest = ([None] * len(seeds) for _ in range(4))
    out = []

    def start(i, seed):
        obs, info = envs[i].reset(seed=np.array([seed]))
        lives[i], fire[i], still[i], newest[i] = info["lives"][0], False, 0, obs[0, -1]

    for i, seed in enumerate(seeds):
        start(i, seed)
    for t, row in enumerate(actions):
        if t in restart:
            start(*restart[t])
        step = []
        for i, env in enumerate(envs):
            env.send(np.array([fire_index if fire[i] else row[i]], dtype=np.int32))
            obs, reward, terminated, truncated, info = env.recv()
            done = bool(terminated[0] or truncated[0])
            still[i] = still[i] + 1 if np.array_equal(obs[0, -1], newest[i]) else 0
            newest[i] = obs[0, -1]
            pressed = bool(limit) and still[i] >= limit
            if pressed:
                still[i] = 0
            fire[i] = (info["lives"][0] < lives[i] or pressed) and not done
            lives[i] = info["lives"][0]
            step.append((obs[0], reward[0], done))
        out.append(step)
    for env in envs:
        env.close()
    return out


def test_the_pool_equals_ale_py_with_fire_inserted_by_hand():
    """Frame for frame, with a partial reset midway (its lives are the new episode's)."""
    rng = np.random.default_rng(0)
    seeds, steps = [3, 4, 5], 260
    actions = rng.choice([0, 2, 3], size=(steps, 3)).astype(np.int32)  # never FIRE itself
    restart = {130: (1, 99)}
    ref = by_hand("breakout", seeds, actions, restart)
    pool = AtariPool(AtariConfig("breakout", fire_on_life_loss=True), 3, num_threads=2)
    pool.reset(np.ones(3, bool), seeds)
    ended, fired = np.zeros(3, bool), 0
    for t, row in enumerate(actions):
        if t in restart:
            i, seed = restart[t]
            pool.reset(np.arange(3) == i, [seed])
            ended[i] = False
        fired += int(pool.fire_next.sum())
        pool.send(row)
        obs, rewards, done = pool.recv()
        for i in range(3):
            if ended[i]:  # rows of an ended episode are ignored until its reset
                continue
            ref_obs, ref_reward, ref_done = ref[t][i]
            assert np.array_equal(obs[i], ref_obs), (t, i)
            assert (rewards[i], done[i]) == (ref_reward, ref_done), (t, i)
        ended |= done
    pool.close()
    assert fired >= 6  # lives were lost and FIRE inserted: the comparison is not vacuous


def test_a_game_waiting_for_fire_goes_on_with_the_frozen_screen_rule_and_idles_without():
    """Bowling has no lives: only a frozen screen tells that it waits for FIRE."""
    steps, over = noop_steps(AtariConfig("bowling", fire_on_life_loss=True,
                                         fire_on_frozen_screen=30))
    assert over and steps < 4000  # ten frames bowled, each started by a FIRE on a still screen
    assert noop_steps(AtariConfig("bowling", fire_on_life_loss=True)) == (5000, False)


@pytest.mark.parametrize("game", ["gopher", "bowling"])
def test_the_pool_equals_ale_py_with_fire_on_frozen_screens_inserted_by_hand(game):
    """Frame for frame, both rules on (bowling has no lives: the frozen screen rule alone)."""
    rng = np.random.default_rng(1)
    seeds, steps, limit = [3, 4], 400, 8
    # never FIRE itself, mostly NOOP: still screens come often
    actions = rng.choice([0, 2, 3], size=(steps, 2), p=[0.8, 0.1, 0.1]).astype(np.int32)
    ref = by_hand(game, seeds, actions, {}, limit)
    pool = AtariPool(AtariConfig(game, fire_on_life_loss=True, fire_on_frozen_screen=limit),
                     2, num_threads=2)
    pool.reset(np.ones(2, bool), seeds)
    ended, fired = np.zeros(2, bool), 0
    for t, row in enumerate(actions):
        fired += int(pool.fire_next[~ended].sum())
        pool.send(row)
        obs, rewards, done = pool.recv()
        for i in np.flatnonzero(~ended):
            ref_obs, ref_reward, ref_done = ref[t][i]
            assert np.array_equal(obs[i], ref_obs), (t, i)
            assert (rewards[i], done[i]) == (ref_reward, ref_done), (t, i)
        ended |= done
    pool.close()
    assert fired >= 4  # FIRE was inserted: the comparison is not vacuous


def test_the_frozen_screen_rule_resolves_to_the_quick_default_for_atari_only():
    from neuroevo.build import resolve
    from neuroevo.config import load

    assert resolve(Config()).env.fire_on_frozen_screen == 30
    cfg = Config()
    cfg.env.id = "CartPole-v1"
    assert resolve(cfg).env.fire_on_frozen_screen is None
    root = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "configs"
    for name in ("deep_ga_atari", "random_search_atari", "openai_es_atari",
                 "openai_es_atari_cpu", "nses_frostbite", "nsres_frostbite"):
        paper = resolve(load(str(root / f"{name}.yaml")))
        assert paper.env.fire_on_frozen_screen == 0 and paper.env.fire_on_life_loss is False


@pytest.mark.parametrize("fire", [False, True])
def test_frames_count_every_step_fire_included(fire):
    """The evaluator's frames are its steps times the frame skip, inserted FIRE steps
    included (the engine's episodes equal a naive loop with the setting on:
    ``test_atari_engine.py``, whose configs take the default)."""
    env = env_spec(EnvConfig(game="breakout", episode_cap=400, fire_on_life_loss=fire,
                             fire_on_frozen_screen=0))
    template, spec = build_template("small", env.obs_shape, env.action.outputs)
    pop = GA(spec.num_params, init_std=spec.init_std(), population_size=4, truncation=2,
             elite_candidates=0, seed=3, noise=NoiseTable.shared(size=1 << 25)).ask()
    ev = PipelinedEvaluator(BatchedPolicy(template, spec), env, subsets=2, slots=1,
                            threads=1, device="cpu", seed=7)
    result = evaluate_one(ev, pop)
    ev.close()
    assert result.frames == 4 * int(result.steps.sum())
    # random members that never press FIRE idle to the cap without the setting
    assert (result.steps.max() < 400) == fire


def test_the_setting_resolves_on_for_games_and_is_recorded():
    from neuroevo.build import resolve

    assert resolve(Config()).env.fire_on_life_loss is True
    cfg = Config()
    cfg.env.fire_on_life_loss = False
    assert resolve(cfg).env.fire_on_life_loss is False
    cfg = Config()
    cfg.env.id = "CartPole-v1"
    assert resolve(cfg).env.fire_on_life_loss is None


def test_a_run_directory_from_before_the_settings_resumes_with_them_off(tmp_path):
    """A ``config.yaml`` without the keys was written before they existed, when no FIRE was
    pressed: it loads and resumes with both rules off, and its checkpoint's identity (also
    without the keys) agrees."""
    quick = ["--config", "experiments/configs/quick_cpu_atari.yaml", "--population", "4",
             "--device", "cpu", "--no-progress", "--set", "algo.test_episodes=0"]
    root = str(pathlib.Path(__file__).parents[2])
    run = subprocess.run([sys.executable, "-m", "neuroevo", "run", "ga", *quick,
                          "--generations", "1", "--set", "env.fire_on_life_loss=false",
                          "--set", "env.fire_on_frozen_screen=0",
                          "--run-dir", str(tmp_path / "r")], cwd=root, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    config = tmp_path / "r" / "config.yaml"
    text = config.read_text()
    lines = ("  fire_on_life_loss: false\n", "  fire_on_frozen_screen: 0\n")
    assert all(line in text for line in lines)
    for line in lines:
        text = text.replace(line, "")
    config.write_text(text)
    run_dir = RunDir(str(tmp_path / "r"))
    cfg = run_dir.load_config()
    assert cfg.env.fire_on_life_loss is False and cfg.env.fire_on_frozen_screen == 0
    older = {k: v for k, v in identity(cfg).items()
             if k not in ("env.fire_on_life_loss", "env.fire_on_frozen_screen")}
    run_dir.check_identity(cfg, older)  # an identity saved before the keys: the same run
    cfg.env.fire_on_life_loss = True
    with pytest.raises(CheckpointError, match=r"env.fire_on_life_loss: False -> True"):
        run_dir.check_identity(cfg, older)
    cfg.env.fire_on_life_loss, cfg.env.fire_on_frozen_screen = False, 30
    with pytest.raises(CheckpointError, match=r"env.fire_on_frozen_screen: 0 -> 30"):
        run_dir.check_identity(cfg, older)
    out = subprocess.run([sys.executable, "-m", "neuroevo", "resume", str(tmp_path / "r"),
                          "--generations", "2", "--no-progress"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert all(line in config.read_text() for line in lines)  # written back as they ran
