"""Behaviour characterisations (BCs): one vector per episode, for novelty search and
MAP-Elites, computed where the episode ends and returned in ``EpisodeBatch.extras["bc"]``.

A ``Behaviour`` takes ``(pool, envs, final_obs)`` for the envs whose episodes just ended,
before their slots are refilled, and returns ``[len(envs), d]``. ``built_in`` asks the pool
(``pool.behaviour(envs)``: the env kind's own BC, ``envs.spec.Kind.behaviour``);
``of_final_observation(fn)`` wraps a user's function of one final observation (the Python
API's ``behaviour=``). Either way a BC depends on the episode alone (its seed and actions),
never on the slot, subset, driver or worker that ran it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from neuroevo.errors import ConfigError

Behaviour = Callable[[object, np.ndarray, np.ndarray], np.ndarray]


def built_in(pool, envs: np.ndarray, final_obs: np.ndarray) -> np.ndarray:
    """The env kind's own BC of these envs' episodes."""
    measure = getattr(pool, "behaviour", None)
    if measure is None:
        raise ConfigError(f"{type(pool).__name__} has no built-in behaviour "
                          "characterisation; give one: neuroevo.train(..., behaviour=fn), fn "
                          "mapping an episode's final observation to a vector")
    return np.asarray(measure(envs), dtype=np.float32)


def of_final_observation(fn: Callable[[np.ndarray], np.ndarray]) -> Behaviour:
    """A ``Behaviour`` from ``fn(final_observation) -> [d]``, called once per episode."""
    def behaviour(pool, envs: np.ndarray, final_obs: np.ndarray) -> np.ndarray:
        rows = [_vector(fn, fn(obs)) for obs in final_obs]
        shapes = {row.shape for row in rows}
        if len(shapes) != 1 or len(rows[0].shape) != 1:
            raise ConfigError(f"the behaviour function {_name(fn)} must return one 1-D "
                              "vector of the same length for every episode, got shapes "
                              f"{sorted(shapes)}")
        return np.stack(rows)
    return behaviour


def _vector(fn: Callable, value) -> np.ndarray:
    """``value`` as float32, or a one-line error naming ``fn`` and what it returned where
    numpy cannot read it as numbers (a string, a dict, ragged lists)."""
    try:
        return np.asarray(value, dtype=np.float32)
    except (ValueError, TypeError):
        shown = " ".join(repr(value).split())  # one line, however the type prints
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ConfigError(f"the behaviour function {_name(fn)} returned "
                          f"{type(value).__name__} {shown}, not numbers; make it return a 1-D "
                          "vector of numbers (a list or numpy array of floats)") from None


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def check_behaviour(bc: np.ndarray, episodes: int, size: int, who: Callable) -> None:
    """Refuse BCs of the wrong shape or with a non-finite value; ``who(k)`` gives the
    ``(member, population)`` of the ``k``-th episode, for the message."""
    def name(k: int) -> str:
        member, pop = who(k)
        return f"member {member} (generation {pop.generation}, phase {pop.phase})"

    if bc.shape != (episodes, size):
        raise ConfigError(f"the behaviour characterisation of {name(0)} has shape "
                          f"{bc.shape[1:]}, expected ({size},): every episode's must have the "
                          "same length")
    bad = np.flatnonzero(~np.isfinite(bc).all(axis=1))
    if len(bad):
        raise ConfigError(f"the behaviour characterisation of {name(int(bad[0]))} is not "
                          f"finite: {bc[bad[0]].tolist()}; make the behaviour function "
                          "return finite values")
