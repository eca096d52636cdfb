"""Environment pools speaking one small protocol: ``reset(mask, seeds) / send / recv``.

Each pool steps ``num_envs`` environments; ``reset`` (re)starts the masked ones from given
seeds, so an episode's trajectory depends on its seed and actions alone, never on which env
of which pool ran it. Importing this package imports no simulator; pools import theirs lazily.
"""



def make_vec(env_id: str, num_envs: int, threads: int = 0):
    """A ``gymnasium.vector.VectorEnv`` of ``num_envs`` envs of ``env_id``.

    The six v5 locomotion tasks get the batched ``MujocoVectorEnv``; any other gymnasium id
    gets gymnasium's own sync vector env (the generic fallback).

    >>> envs = make_vec("Hopper-v5", 4); obs, _ = envs.reset(seed=0); obs.shape
    (4, 11)
    """
    from neuroevo.envs.locomotion import TASKS

    if env_id in TASKS:
        from neuroevo.envs.mujoco_vec import MujocoVectorEnv

        return MujocoVectorEnv(env_id, num_envs, threads)
    import gymnasium

    from neuroevo.envs.gym import check_env_id

    return gymnasium.make_vec(check_env_id(env_id), num_envs, vectorization_mode="sync")
