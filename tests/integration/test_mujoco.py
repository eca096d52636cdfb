"""The batched MuJoCo tasks against gymnasium's own envs, fed the same seeds and actions."""

import os
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from neuroevo.envs import make_vec, mjnative
from neuroevo.envs.locomotion import TASKS
from neuroevo.envs.mujoco import MujocoPool, MujocoSims
from neuroevo.errors import StateError, UnknownName


def _compare(ours, ref, steps: int, seed: int, scale: float = 1.5) -> tuple[int, int]:
    """Step both with the same random actions (some beyond the bounds); returns the number
    of terminations and truncations seen."""
    np.testing.assert_allclose(ours.reset(seed=seed)[0], ref.reset(seed=seed)[0], rtol=0,
                               atol=1e-6)
    rng = np.random.default_rng(seed)
    high = ref.single_action_space.high
    ends = [0, 0]
    for _ in range(steps):
        actions = (rng.uniform(-scale, scale, (ours.num_envs, len(high))) * high)
        actions = actions.astype(np.float32)
        got, want = ours.step(actions), ref.step(actions)
        for name, x, y in zip(("obs", "reward", "terminated", "truncated"), got[:4], want[:4],
                              strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6, err_msg=name)
        ends[0] += int(want[2].sum())
        ends[1] += int(want[3].sum())
    return tuple(ends)


@pytest.mark.parametrize("env_id", sorted(t for t in TASKS if TASKS[t].base is None))
def test_equals_gymnasium_sync_vector_env(env_id):
    ours = make_vec(env_id, 3, threads=2)
    ref = gymnasium.make_vec(env_id, 3, vectorization_mode="sync")
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.single_action_space == ref.single_action_space
    terminated, _ = _compare(ours, ref, 300, seed=5)
    if env_id not in ("HalfCheetah-v5", "Swimmer-v5"):  # these never terminate
        assert terminated > 0  # autoreset after termination was compared too


def test_time_limit_truncates_and_autoresets_like_gymnasium():
    ours = make_vec("Swimmer-v5", 2, threads=1)
    ref = gymnasium.make_vec("Swimmer-v5", 2, vectorization_mode="sync")
    assert _compare(ours, ref, 1003, seed=1) == (0, 2)


def test_partial_reset_and_thread_count_do_not_change_trajectories():
    a, b = make_vec("Hopper-v5", 4, threads=1), make_vec("Hopper-v5", 4, threads=3)
    a.reset(seed=[10, 11, 12, 13])
    b.reset(seed=[99, 11, 98, 13])
    mask = np.array([True, False, True, False])
    b.reset(seed=[10, None, 12, None], options={"reset_mask": mask})
    actions = np.random.default_rng(0).uniform(-1, 1, (50, 4, 3)).astype(np.float32)
    for act in actions:
        for x, y in zip(a.step(act)[:4], b.step(act)[:4], strict=True):
            assert np.array_equal(x, y)


def test_pool_episode_equals_a_fresh_gymnasium_env_with_its_seed():
    rng = np.random.default_rng(3)
    ref = gymnasium.make("Walker2d-v5")
    obs, _ = ref.reset(seed=42)
    expected, actions = [(obs, 0.0, False)], []
    while not expected[-1][2]:
        actions.append(rng.uniform(-1, 1, 6).astype(np.float32))
        obs, reward, term, trunc, _ = ref.step(actions[-1])
        expected.append((obs, reward, term or trunc))
    pool = MujocoPool("Walker2d-v5", 3, threads=2)
    pool.reset(np.ones(3, bool), np.array([1, 2, 3]))
    for _ in range(4):  # some history in env 2 first
        pool.send(np.zeros((3, 6), np.float32))
        pool.recv()
    got = [(pool.reset(np.array([False, False, True]), np.array([42]))[2], 0.0, False)]
    for act in actions:
        pool.send(np.stack([np.zeros(6, np.float32), np.ones(6, np.float32), act]))
        obs, rewards, done = pool.recv()
        got.append((obs[2], rewards[2], done[2]))
    for (o, r, d), (eo, er, ed) in zip(got, expected, strict=True):
        np.testing.assert_allclose(o, eo.astype(np.float32), rtol=0, atol=1e-6)
        assert r == pytest.approx(er, abs=1e-9) and d == ed
    # the behaviour characterisation (novelty search): the mass-weighted centre of all bodies
    data, mass = ref.unwrapped.data, ref.unwrapped.model.body_mass
    np.testing.assert_allclose(pool.behaviour(np.array([2]))[0],
                               (mass @ data.xipos / mass.sum())[:2], rtol=0, atol=1e-6)
    pool.send(np.zeros((3, 6), np.float32))
    assert pool.recv()[1][2] == 0.0  # an ended env is not stepped until its next reset


def _feet_by_hand(model, data, feet: list[int]) -> np.ndarray:
    """Which of the ``feet`` bodies a contact at distance <= 0 touches, a loop over
    ``data.contact``."""
    touching = np.zeros(len(feet), bool)
    for j in range(data.ncon):
        c = data.contact[j]
        for geom in c.geom:
            if c.dist <= 0 and geom >= 0 and model.geom_bodyid[geom] in feet:
                touching[feet.index(model.geom_bodyid[geom])] = True
    return touching


@pytest.mark.parametrize("env_id, names", [("Walker2d-v5", ["foot", "foot_left"]),
                                           ("Ant-v5", None)])
def test_feet_contact_is_each_foot_s_share_of_steps_in_gymnasium_s_own_env(env_id, names):
    """QDax's feet-contact descriptor, against gymnasium's env stepped by hand. Ant's feet,
    unnamed there, are the bodies at the ends of its legs: those that are nobody's parent."""
    seeds, steps = [5, 6, 7], 120
    pool = MujocoPool(env_id, 3, threads=1, behaviour="feet_contact")
    pool.reset(np.ones(3, bool), np.array(seeds))
    refs = [gymnasium.make(env_id) for _ in seeds]
    model = refs[0].unwrapped.model
    leaves = [b for b in range(model.nbody) if b not in set(model.body_parentid[1:])]
    feet = [model.body(n).id for n in names] if names else leaves
    counts, lengths, live = np.zeros((3, len(feet))), np.zeros(3), np.ones(3, bool)
    ended = np.zeros(3, bool)
    for ref, seed in zip(refs, seeds, strict=True):
        ref.reset(seed=seed)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        actions = rng.uniform(-1, 1, (3, model.nu)).astype(np.float32)
        pool.send(actions)
        ended |= pool.recv()[2]
        for i, ref in enumerate(refs):
            if live[i]:
                _, _, term, trunc, _ = ref.step(actions[i])
                counts[i] += _feet_by_hand(model, ref.unwrapped.data, feet)
                lengths[i] += 1
                live[i] = not (term or trunc)
        assert (ended == ~live).all()
    expected = counts / lengths[:, None]
    assert 0 < expected.mean() < 1  # the feet touch and leave the ground
    np.testing.assert_array_equal(pool.behaviour(np.arange(3)), expected.astype(np.float32))
    pool.reset(np.array([True, False, False]), np.array([9]))  # a restart counts afresh
    pool.send(np.zeros((3, model.nu), np.float32))
    pool.recv()
    assert set(pool.behaviour(np.array([0]))[0]) <= {0.0, 1.0}


def test_errors_name_the_problem():
    with pytest.raises(UnknownName, match=r"'HalfCheeta-v5'; did you mean 'HalfCheetah-v5'"):
        make_vec("HalfCheeta-v5", 2)
    pool = MujocoPool("HalfCheetah-v5", 2, threads=1)
    pool.reset(np.ones(2, bool), np.array([0, 1]))
    pool.send(np.zeros((2, 6), np.float32))
    with pytest.raises(StateError, match=r"send\(\) twice without recv\(\)"):
        pool.send(np.zeros((2, 6), np.float32))
    pool.recv()
    with pytest.raises(ValueError, match=r"actions must have shape \(2, 6\)"):
        pool.send(np.zeros((2, 5), np.float32))
    pool.send(np.zeros((2, 6), np.float32))  # a refused send leaves the pool usable
    pool.recv()


def test_generic_fallback_is_gymnasium_sync_vector_env():
    envs = make_vec("CartPole-v1", 2)
    assert isinstance(envs, gymnasium.vector.SyncVectorEnv) and envs.num_envs == 2


def test_halfcheetah_compiles_silently_to_the_same_model():
    """HalfCheetah's ``settotalmass`` applied after compiling, as MuJoCo's deprecation
    warning advises: every array of the model equals the attribute's, and nothing is
    printed (the warning comes from MuJoCo's C code, so a fresh process is watched)."""
    import subprocess
    import sys
    from pathlib import Path

    import gymnasium.envs.mujoco as assets
    import mujoco

    from neuroevo.envs.mujoco import _model

    ours = _model(TASKS["HalfCheetah-v5"])
    theirs = mujoco.MjModel.from_xml_path(
        str(Path(assets.__file__).parent / "assets" / "half_cheetah.xml"))
    arrays = [n for n in dir(theirs) if isinstance(getattr(theirs, n, None), np.ndarray)]
    assert "body_mass" in arrays and theirs.body_mass.sum() == pytest.approx(14.0)
    for name in arrays:
        assert np.array_equal(getattr(ours, name), getattr(theirs, name)), name
    code = ("from neuroevo.envs.mujoco import MujocoPool; "
            "MujocoPool('HalfCheetah-v5', 2, 1).close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "settotalmass" not in out.stdout + out.stderr
    old = subprocess.run([sys.executable, "-c", "import mujoco; mujoco.MjModel.from_xml_path("
                          f"{str(Path(assets.__file__).parent / 'assets' / 'half_cheetah.xml')!r})"],
                         capture_output=True, text=True, timeout=120)
    assert "settotalmass" in old.stdout + old.stderr  # the check above can fail


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_the_native_loop_steps_exactly_as_the_python_loop(env_id):
    """The C loop (mjnative) makes the Python loop's calls on the same memory: every field of
    every env, bit for bit, with envs stepped in chunks over threads and some left out."""
    native, python = MujocoSims(env_id, 5, threads=2), MujocoSims(env_id, 5, 1, native=False)
    try:
        assert native._native is not None and python._native is None
        rng = np.random.default_rng(3)
        for sims in (native, python):
            sims.reset(np.arange(5), [7, 8, 9, 10, 11])
        for step in range(40):
            actions = rng.uniform(-1, 1, (5, native.num_actions)).astype(np.float32)
            envs = np.array([0, 2, 3, 4]) if step % 3 else np.arange(5)
            results = []
            for sims in (native, python):
                sims.step_async(actions, envs, inline=step % 2 == 0)
                results.append(sims.step_wait())
            for x, y in zip(*results, strict=True):
                assert np.array_equal(x, y)
            for name in native.fields:
                assert np.array_equal(native.fields[name], python.fields[name]), name
            for d, e in zip(native.datas, python.datas, strict=True):
                assert np.array_equal(d.qacc_warmstart, e.qacc_warmstart)
    finally:
        native.close()
        python.close()


def test_the_native_loop_is_built_once_and_without_a_compiler_the_python_loop_steps(
        tmp_path, monkeypatch):
    built = mjnative.compile_loop(str(tmp_path))
    stamp = os.stat(built).st_mtime_ns
    assert mjnative.compile_loop(str(tmp_path)) == built  # the cached build, not a new one
    assert os.stat(built).st_mtime_ns == stamp and os.listdir(tmp_path) == [Path(built).name]
    with monkeypatch.context() as env:
        env.setenv("NEUROEVO_NATIVE", "0")  # the user's choice: the Python loop, no warning
        sims = MujocoSims("Hopper-v5", 2, threads=1)
        assert sims._native is None
        sims.close()

    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    mjnative._functions.cache_clear()
    try:
        with pytest.warns(UserWarning, match="step through Python.*C compiler"):
            sims = MujocoSims("Hopper-v5", 2, threads=1)
        assert sims._native is None
        sims.reset(np.arange(2), [0, 1])
        sims.step_async(np.zeros((2, sims.num_actions)), np.arange(2))
        assert sims.step_wait()[0].shape == (2,)
        sims.close()
    finally:
        mjnative._functions.cache_clear()


def test_the_humanoid_trap_adds_conti_s_three_walls_and_nothing_else():
    """HumanoidTrap-v0: Humanoid-v5 with extra/humanoid_maze.xml's U of walls; a walker put
    against the front wall touches it, and the plain task's episodes are unchanged."""
    import mujoco

    from neuroevo.envs.locomotion import TASKS
    from neuroevo.envs.mujoco import _model, max_steps

    trap, plain = _model(TASKS["HumanoidTrap-v0"]), _model(TASKS["Humanoid-v5"])
    assert trap.ngeom == plain.ngeom + 3 and trap.nq == plain.nq and trap.nu == plain.nu
    assert max_steps("HumanoidTrap-v0") == 1000
    walls = {mujoco.mj_name2id(trap, mujoco.mjtObj.mjOBJ_GEOM, f"wall{k}") for k in range(3)}
    data = mujoco.MjData(trap)
    data.qpos[0] = 5.3  # the torso 0.1 from the front wall's face at x = 5.4
    for _ in range(50):
        mujoco.mj_step(trap, data)
    touched = {g for c in data.contact[:data.ncon] for g in (c.geom1, c.geom2)}
    assert touched & walls
    pool = MujocoPool("HumanoidTrap-v0", 2)
    pool.reset(np.ones(2, bool), np.array([1, 2]))
    pool.send(np.zeros((2, 17), np.float32))
    pool.recv()
    assert pool.behaviour(np.arange(2)).shape == (2, 2)
