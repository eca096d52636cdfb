"""neuroevo's error hierarchy: every message says what was expected, what was found, and the fix.

Errors that a user or a config can cause subclass ``ConfigError``, which is also a
``ValueError`` so that plain ``except ValueError`` keeps working.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class NeuroevoError(Exception):
    """Base of every error neuroevo raises on purpose."""


class ConfigError(NeuroevoError, ValueError):
    """A hyperparameter, option or input value is out of its allowed range."""


class UnknownName(ConfigError, KeyError):
    """A name (game, env id, algorithm, config key) that neuroevo does not know."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        listing = "" if close or len(known) > 20 else f"; known: {', '.join(known)}"
        super().__init__(f"unknown {kind} {name!r}{hint}{listing}")
        self.kind, self.name, self.suggestions = kind, name, close

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return self.args[0]


class DependencyNotInstalled(NeuroevoError, ImportError):
    """An optional dependency is missing; the message names the pip command that fixes it."""


class StateError(NeuroevoError, RuntimeError):
    """Methods called in the wrong order (tell before ask, recv before send, ...)."""


class WorkerError(NeuroevoError, RuntimeError):
    """A worker (thread, process or Ray actor) failed; the message names which one."""


class CheckpointError(NeuroevoError):
    """A checkpoint or run directory is missing, corrupt or from another run."""


class StorageError(NeuroevoError):
    """Writing a file failed (a full disk, no permission); the message names the path."""


def check_range(name: str, value, ok: bool, allowed: str) -> None:
    """Raise ``ConfigError`` naming the parameter and its allowed range unless ``ok``."""
    if not ok:
        raise ConfigError(f"{name} must be {allowed}, got {value!r}")
