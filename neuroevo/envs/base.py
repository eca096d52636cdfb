"""The pool protocol every env kind speaks, and the base that enforces its call order.

A pool steps ``num_envs`` environments of one task. ``reset(mask, seeds)`` (re)starts the
masked envs, each from its own seed, and returns every env's observation; ``send(actions)``
starts a step of the running envs; ``recv()`` waits for it and returns ``(obs, rewards,
done)``. An env whose episode ended is not stepped again until its next reset (its rows of
a step are ignored). Reset before the first send, then send and recv alternate; a reset
happens between steps only. ``PoolBase`` checks that order, with the same one-line errors
for every kind, and the kinds implement ``_reset``, ``_send`` and ``_recv``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from neuroevo.errors import StateError, check_range


class Pool(Protocol):
    num_envs: int

    def reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray: ...

    def send(self, actions: np.ndarray) -> None: ...

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def close(self) -> None: ...


class PoolBase:
    def __init__(self, num_envs: int):
        check_range("num_envs", num_envs, isinstance(num_envs, int) and num_envs >= 1, ">= 1")
        self.num_envs = num_envs
        self._in_flight = self._started = False

    def _error(self, call: str, fix: str) -> StateError:
        return StateError(f"{type(self).__name__}.{call}; {fix}")

    def reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Restart the envs in ``mask`` (``[num_envs]`` bool) from ``seeds`` (one per masked
        env, in env order); returns every env's observation."""
        if self._in_flight:
            raise self._error("reset() while a step is in flight", "call recv() first")
        mask, seeds = np.asarray(mask, dtype=bool), np.asarray(seeds, dtype=np.int64)
        if mask.shape != (self.num_envs,) or seeds.shape != (int(mask.sum()),):
            raise ValueError(f"{type(self).__name__}.reset(): a mask of {self.num_envs} envs "
                             f"and a seed per masked env, got {mask.shape} and {seeds.shape}")
        obs = self._reset(mask, seeds)
        self._started = True
        return obs

    def send(self, actions: np.ndarray) -> None:
        if self._in_flight:
            raise self._error("send() twice without recv()", "call recv() first")
        if not self._started:
            raise self._error("send() before reset()", "reset every env first")
        self._send(actions)
        self._in_flight = True

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(obs [N, ...], rewards [N], done [N])`` of the step sent last."""
        if not self._in_flight:
            raise self._error("recv() without send()", "call send(actions) first")
        out = self._recv()
        self._in_flight = False
        return out

    def close(self) -> None:
        pass

    def _reset(self, mask: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _send(self, actions: np.ndarray) -> None:
        raise NotImplementedError

    def _recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError


def random_play(pool: Pool, num_actions: int, seed: int, size: int) -> np.ndarray:
    """``[size, *obs]``: the observation after each step of uniformly random play in env 0
    of ``pool``, a new episode whenever one ends, as OpenAI's and Uber's ES collect the
    reference batch of virtual batch normalisation (``get_ref_batch``). Actions and episode
    seeds come from ``seed`` alone."""
    rng = np.random.default_rng([seed, 0x5642])  # a stream of its own ("VB")
    one = np.zeros(pool.num_envs, dtype=bool)
    one[0] = True
    pool.reset(one, rng.integers(0, 2**31, 1))
    out = []
    while len(out) < size:
        actions = np.zeros(pool.num_envs, dtype=np.int32)
        actions[0] = rng.integers(num_actions)
        pool.send(actions)
        obs, _, done = pool.recv()
        out.append(obs[0].copy())
        if done[0]:
            pool.reset(one, rng.integers(0, 2**31, 1))
    return np.stack(out)
