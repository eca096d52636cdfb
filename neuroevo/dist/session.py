"""The Ray session: joining a cluster or starting a local instance, and stopping it. This is
the one module that imports ray; the actors (``ray_backend``) get it from ``ray_module()``,
the sweeps (``neuroevo.sweep``) Ray Tune from ``tune_module()`` and ``optuna_search()``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tempfile
import threading

from neuroevo.errors import ConfigError, DependencyNotInstalled

_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is 127.0.0.1
_started_here = False  # this process started the Ray instance (and shuts it down)
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ray_module():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a declared dependency
        raise DependencyNotInstalled("--backend ray needs ray: pip install 'ray>=2.9'") from e
    return ray


def _reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when HOST:PORT does not answer."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise ConfigError(f"cannot reach the Ray cluster at {address} ({reason}); check the "
                          "address and that 'ray status' works on that machine") from None


def init(address: str = "") -> None:
    """Join the Ray cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), or
    start a new local instance: explicitly (``address="local"``, so it never joins a cluster
    that ``RAY_ADDRESS`` or ``ray start`` left around), sized to this machine, with every
    server on 127.0.0.1 and no dashboard."""
    global _started_here
    if "ray" not in sys.modules and not address:
        os.environ[_LOOPBACK] = "0"  # read when ray is imported; Ray's processes inherit it
    ray = ray_module()
    if ray.is_initialized():
        return
    if address and address != "auto":
        _reachable(address)
    # Ray installs its own handlers for SIGTERM (and others) in the driver; the caller's
    # (the CLI's: stop at once, keep the checkpoint, exit 143) are put back afterwards.
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in _SIGNALS} if main else {}
    try:
        if address:
            with _stderr_kept_on_success():
                ray.init(address=address, log_to_driver=False, logging_level="error")
        else:
            ray.init(address="local", num_cpus=len(os.sched_getaffinity(0)),
                     include_dashboard=False, log_to_driver=False,
                     object_store_memory=256 << 20, logging_level="error")
            _started_here = True
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        # Ray sends its auth token to an explicit address only when told to: a cluster with
        # token authentication (a head that had a token when 'ray start' ran, or that was
        # started with RAY_AUTH_MODE=token) refuses a driver that was not.
        hint = ("; if the cluster uses token authentication, set RAY_AUTH_MODE=token and its "
                "token (RAY_AUTH_TOKEN, or ~/.ray/auth_token)"
                if address not in ("", "auto") and os.environ.get("RAY_AUTH_MODE") != "token"
                else "")
        raise ConfigError(f"cannot start or join Ray at {address or 'this machine'!r} "
                          f"({first}); check --ray-address{hint}") from None
    finally:
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)


@contextlib.contextmanager
def _stderr_kept_on_success():
    """What Ray's C++ core writes to stderr meanwhile (a refused join logs a warning a
    second for 20 s) is written out when the block succeeds and dropped when it raises,
    whose one-line error says it all."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as held:
            os.dup2(held.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
            held.seek(0)
            os.write(2, held.read())  # the bytes were fd 2's: back to fd 2, not sys.stderr
    finally:
        os.close(saved)


def shutdown() -> None:
    """Stop the Ray instance this process started (a joined cluster stays up)."""
    global _started_here
    if _started_here:
        ray_module().shutdown()
        _started_here = False


def tune_module():
    """``ray.tune`` (sweeps): Ray with its ``tune`` extra."""
    ray_module()
    try:
        from ray import tune
    except ImportError as e:
        raise DependencyNotInstalled("sweeps need Ray Tune: pip install 'ray[tune]'") from e
    return tune


def optuna_search(**options):
    """Tune's Optuna searcher (``--search optuna``): Optuna is an optional extra."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise DependencyNotInstalled("--search optuna needs Optuna: pip install -e "
                                     "'.[optuna]' (or pip install optuna)") from None
    from ray.tune.search.optuna import OptunaSearch

    return OptunaSearch(**options)
