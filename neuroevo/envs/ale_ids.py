"""ale-py's gymnasium ids (``ALE/Breakout-v5``, ``BreakoutNoFrameskip-v4``, ...) on the
batched Atari engine, with the settings each id means in ale-py (its registration
kwargs, 0.12.1), which ``config.yaml`` records:

- ``ALE/<Game>-v5``: sticky actions 0.25 (Machado et al. 2018), frame skip 4;
- ``<Game>NoFrameskip-v4``: sticky actions 0, frame skip 1 (the DQN-era protocol wraps it
  in a 4-frame max-pooled skip, which is ``--game <game>``'s default);
- ``<Game>NoFrameskip-v0``: sticky actions 0.25, frame skip 1;
- the minimal action set (``full_action_space`` False) and 108,000 frames per episode.

An id's env resets as ``gymnasium.make`` of it does: no FIRE, no no-op frames
(``noop_max`` 0; ``--game`` presses FIRE and plays up to 29 no-ops, ``neuroevo.envs.atari``).
Observations are the engine's: the max over an agent step's last 2 frames, grayscale 84x84,
a stack of 4 (gymnasium's ``AtariPreprocessing`` and ``FrameStackObservation``), where
``gymnasium.make`` alone returns one RGB frame. ``<Game>-v4`` and ``<Game>-v0`` skip a
random 2-4 frames each step, which the batched pool does not do: one line refuses them.
"""

from __future__ import annotations

import functools

from neuroevo.errors import ConfigError


@functools.cache
def _registered() -> dict:
    """Every ale-py id's registration kwargs, by id."""
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    return {k: dict(s.kwargs) for k, s in gymnasium.envs.registry.items()
            if str(s.entry_point).startswith("ale_py")}


def is_ale_id(env_id: str) -> bool:
    return env_id in _registered()


def settings(env_id: str) -> dict:
    """The env config an ale-py id means: ``game``, ``sticky_actions``, ``frameskip``,
    ``full_action_space``, ``noop_max`` and ``fire_reset`` (module doc)."""
    kw = _registered()[env_id]
    if not isinstance(kw["frameskip"], int):
        low, high = kw["frameskip"]
        raise ConfigError(f"{env_id} skips a random {low} to {high - 1} frames per step, "
                          f"which the batched Atari pool does not do; use "
                          f"ALE/{_name(env_id)}-v5, {_name(env_id)}NoFrameskip-v4 or "
                          f"--game {kw['game']}")
    return {"game": kw["game"], "sticky_actions": float(kw["repeat_action_probability"]),
            "frameskip": kw["frameskip"], "full_action_space": bool(kw["full_action_space"]),
            "noop_max": 0, "fire_reset": False}


def _name(env_id: str) -> str:
    """``Breakout`` of ``Breakout-v4`` or ``ALE/Breakout-v5``."""
    return env_id.split("/")[-1].rsplit("-", 1)[0].removesuffix("NoFrameskip")
