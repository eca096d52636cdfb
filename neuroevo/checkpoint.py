"""Run directories: the resolved config, metrics, the elite and an atomic checkpoint.

Layout of a run directory::

    config.yaml                    the resolved config: what ran (the machine layout may
                                   stay automatic, so another machine picks its own)
    run.json                       the layout each session ran (device, kernels, workers,
                                   subsets, slots, threads; Ray actors)
    metrics.jsonl/.csv             one row per generation (strict JSON: NaN and inf are null)
    elite.json                     the elite's compact genome (GA / RS)
    policy.safetensors             the elite's (GA / RS) or centre's (ES) network, layout and
                                   observation normaliser (``neuroevo.policy.export``)
    checkpoint/state.safetensors   optimizer state, counters, metric rows, run identity
    .lock                          held (``flock``) by the one process writing the run

Nothing here is unpickled when loaded: state files are JSON plus raw tensors
(``neuroevo.serial``), configs are read with ``yaml.safe_load``. Every file is written
through ``atomic_write`` (a crash leaves the old version or the new one) and never through
a symlink planted inside the directory. The checkpoint holds the metric rows too: on resume
the metric files are rewritten from it, so they never run ahead of the state.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import json
import math
import os
import shutil
import time

import torch
import yaml

from neuroevo import schema
from neuroevo.config import Config, from_dict, identity, parse_yaml, to_dict
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.files import atomic_write, is_temporary, make_dirs, read_regular, storage_error
from neuroevo.loop import Callback, Totals
from neuroevo.metrics import METRICS, columns
from neuroevo.optim import ALGORITHMS
from neuroevo.policy.export import policy_bytes
from neuroevo.serial import first_line, load_file, loads_strict, save_file

STATE_FORMAT = "neuroevo.checkpoint/2"
# Atari settings added after runs were written: a config or checkpoint without one ran as
# this value (off).
LEGACY_OFF = {"fire_on_life_loss": False, "fire_on_frozen_screen": 0}
# Env settings added later whose absence means what every run did before, any env.
LEGACY_ENV = {"full_action_space": False, "fire_reset": True, "sim": "native", "behaviour": "auto"}
# Net settings added later (the runs before had none of it).
LEGACY_NET = {"vbn": False}
# Before the algorithm registry every run's config held every algo key, those its
# algorithm ignores at these defaults; they now stay None (the algorithm does not use them).
LEGACY_ALGO = {"sigma": None, "truncation": 0, "elite_candidates": 5,
               "validation_episodes": 5, "lr": 0.01, "l2": 0.005, "rank": 0}
# Algorithm keys added later: a config or checkpoint of an algorithm that has one but without
# it ran as this value (one training episode a member).
LEGACY_ADDED = {"train_episodes": 1}
# What a run writes; ``--force`` removes all of it (and stale temporary files) first.
RUN_FILES = ("config.yaml", "run.json", "metrics.jsonl", "metrics.csv", "elite.json",
             "policy.safetensors", "policy.pt")
RUN_DIRS = ("checkpoint", "tensorboard")


DAMAGED = "the checkpoint was edited or is damaged: restore it from a backup or start the run again"
PARTS = {"optimizer": dict, "totals": Totals, "history": list[dict], "obs_norm": dict | None,
         "vbn_reference": torch.Tensor | None, "identity": dict}  # a checkpoint's top level
OPTIONAL = {"obs_norm": None, "vbn_reference": None, "identity": {}}  # older files lack them
COUNTERS = ("generation", "frames", "episodes")  # what every row holds: integers >= 0
MEASURED = ("fitness_max", "fps")  # and these numbers (the live line and summary read them)
TESTED = ("test_score", "test_score_std", "test_episodes", "test_frames")  # all or none


def check_parts(state: dict) -> None:
    """Refuse a checkpoint whose top-level parts are not of their types, or whose metric
    rows (the history, and the row waiting for its logging episodes) hold a metric that is
    not a number; the optimizer's and the normaliser's own states are checked by them."""
    for name, hint in PARTS.items():
        if name not in state and name not in OPTIONAL:
            raise CheckpointError(f"it lacks its {name!r} part")
        schema.check(hint, state.get(name, OPTIONAL.get(name)), {}, name)  # Totals: each field
    for key, value in state.get("identity", {}).items():
        if not isinstance(key, str) or not (value is None or isinstance(value, (str, bool))
                                            or _number(value)):
            raise CheckpointError(f"identity[{key!r}] holds {value!r}, expected a config "
                                  "value (a number, a string, true, false or null)")
    numbers = {m.name for m in (*METRICS, *ALGORITHMS.metrics())}
    rows = [(f"history[{k}]", row) for k, row in enumerate(state["history"])]
    if state["totals"].pending is not None:
        rows.append(("totals.pending", state["totals"].pending))
    for where, row in rows:
        for key in COUNTERS:
            schema.check(int, row.get(key), {}, f"{where}.{key}")
            if row[key] < 0:
                raise CheckpointError(f"{where}.{key} is {row[key]}, expected >= 0")
        for key in MEASURED:
            if not _number(row.get(key)):
                raise CheckpointError(f"{where}.{key} holds {row.get(key)!r}, expected a number")
        if 0 < sum(key in row for key in TESTED) < len(TESTED):
            raise CheckpointError(f"{where} holds some of {', '.join(TESTED)} but not all")
        for key, value in row.items():
            parts = value.values() if key == "timings" and isinstance(value, dict) else [value]
            if key in numbers and not all(_number(v) for v in parts):
                raise CheckpointError(f"{where}.{key} holds {value!r}, expected a number")


def _number(value) -> bool:
    """An int within int64 or a float (inf and NaN included: metric rows may hold them)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or schema.INT64[0] <= value <= schema.INT64[1]


def state_types() -> dict[str, type]:
    """The classes a checkpoint may hold: every registered optimizer's, and ``Totals``."""
    return {**ALGORITHMS.state_types(), "Totals": Totals}


def _legacy_algo(algo: dict, prefix: str = "") -> dict:
    """``algo`` (a config's section, or an identity's ``algo.*`` keys with ``prefix``)
    without the keys its algorithm ignores that a run before the registry wrote at their
    defaults, and with the keys added since (``LEGACY_ADDED``) that it uses but lacks."""
    name = algo.get(prefix + "name", "ga")
    # a crafted file may hold anything there: an unknown name keeps every key
    used = ALGORITHMS[name].config_keys() if isinstance(name, str) and name in ALGORITHMS \
        else ()
    stale = {prefix + k for k in LEGACY_ALGO if k not in used}
    added = {prefix + k: v for k, v in LEGACY_ADDED.items() if k in used}
    return {**added, **{k: v for k, v in algo.items()
                        if not (k in stale and v == LEGACY_ALGO[k.removeprefix(prefix)])}}


def finite(x):
    """``x`` with every NaN and infinity replaced by None (JSON ``null``)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


class RunDir:
    def __init__(self, path: str):
        self.path = path
        self._lock_fd: int | None = None

    def file(self, name: str) -> str:
        """``DIR/name``, refused when a folder on the way is a symlink (writes would land
        elsewhere). A link at ``name`` itself is harmless: a write renames a new file over
        it, it is not followed."""
        path = os.path.join(self.path, name)
        part = self.path
        for piece in os.path.normpath(name).split(os.sep)[:-1]:
            part = os.path.join(part, piece)
            if os.path.islink(part):
                raise CheckpointError(f"{part} is a symbolic link; neuroevo never reads or "
                                      "writes through links inside a run directory: remove it")
        return path

    def folder(self, name: str) -> str:
        """``DIR/name`` for a folder that neuroevo writes into: no symlink on the way."""
        return os.path.dirname(self.file(os.path.join(name, "-")))

    @property
    def checkpoint(self) -> str:
        return self.file(os.path.join("checkpoint", "state.safetensors"))

    def has_checkpoint(self) -> bool:
        return os.path.exists(self.checkpoint)

    def holds_run(self) -> bool:
        return os.path.exists(self.file("config.yaml"))

    # -- one writer -----------------------------------------------------------------------
    def lock(self, wait: float = 0.0) -> None:
        """Hold ``DIR/.lock`` until ``unlock()`` or the process ends; a second writer gets a
        one-line error naming the process that holds it, after waiting ``wait`` seconds for
        it to end (a sweep's trial, restarted while the killed one still exits)."""
        if self._lock_fd is not None:
            return
        path = self.file(".lock")
        try:
            make_dirs(self.path)  # a failure leaves no folders of its own behind
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise CheckpointError(f"--run-dir {self.path} is a file, not a directory; pick "
                                  "another --run-dir") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise CheckpointError(f"{path} is a symbolic link; remove it") from None
            raise storage_error("lock", path, e) from None
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise CheckpointError(f"run directory {self.path} is in use by process "
                                      f"{holder}; wait for it to end or stop it (kill "
                                      f"{holder}), or pick another --run-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    # -- creating and overwriting ---------------------------------------------------------
    def ensure_free(self, force: bool = False) -> None:
        """Refuse to start a new run over an existing one unless ``force``."""
        if self.holds_run() and not force:
            raise ConfigError(f"run directory {self.path} already holds a run; resume it with "
                              f"'neuroevo resume {self.path}', pick another --run-dir, or "
                              "pass --force to overwrite it")

    def clear(self) -> None:
        """Remove every file an earlier run wrote here (``--force``), links included."""
        for name in (*RUN_FILES, *RUN_DIRS):
            path = os.path.join(self.path, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                elif os.path.lexists(path):
                    os.remove(path)
            except OSError as e:
                raise storage_error("remove", path, e) from None
        self.remove_temporaries()

    def remove_temporaries(self) -> None:
        """Temporary files a killed writer left (``kill -9`` mid-write); call it locked."""
        for folder in (self.path, os.path.join(self.path, "checkpoint")):
            if os.path.isdir(folder) and not os.path.islink(folder):
                for name in os.listdir(folder):
                    if is_temporary(name):
                        with contextlib.suppress(OSError):
                            os.remove(os.path.join(folder, name))

    def create(self, cfg: Config, force: bool = False) -> None:
        """Start a new run here: lock, clear (with ``force``), write the config."""
        self.lock()
        self.ensure_free(force)
        if force:
            self.clear()
        try:
            make_dirs(self.file("checkpoint"))
        except OSError as e:
            raise storage_error("create", self.file("checkpoint"), e) from None
        self.write_config(cfg)
        self.write_metrics([])

    def write_config(self, cfg: Config) -> None:
        atomic_write(self.file("config.yaml"), yaml.safe_dump(to_dict(cfg), sort_keys=False))

    def record_layout(self, layout: dict, generation: int) -> None:
        """Append the machine layout a session runs from ``generation`` on to ``run.json``
        (config.yaml may leave the layout automatic; this says what each machine chose). An
        unreadable ``run.json`` is started again: it informs, nothing is loaded from it."""
        try:
            sessions = loads_strict(read_regular(self.file("run.json")))["sessions"]
            if not isinstance(sessions, list):
                raise ValueError("sessions is not a list")
        except (OSError, ValueError, KeyError, TypeError):
            sessions = []
        sessions.append({"from_generation": generation, **layout})
        atomic_write(self.file("run.json"), json.dumps({"sessions": sessions}, indent=1))

    def load_config(self) -> Config:
        if not os.path.isdir(self.path):
            raise CheckpointError(f"run directory {self.path} does not exist; give the "
                                  "directory that 'neuroevo run' printed")
        path = self.file("config.yaml")
        try:
            data = parse_yaml(read_regular(path).decode())
            if isinstance(data, dict) and isinstance(data.get("algo"), dict):
                data = {**data, "algo": _legacy_algo(data["algo"])}
            cfg = from_dict(data)
        except (OSError, ValueError, yaml.YAMLError, AttributeError, ConfigError) as e:
            raise CheckpointError(f"{path} is missing or corrupt ({first_line(e)}); this is not a "
                                  "neuroevo run directory") from None
        for key, off in LEGACY_OFF.items():  # written before the setting: it ran without
            if not cfg.env.id and key not in data.get("env", {}):
                setattr(cfg.env, key, off)
        for key, value in LEGACY_ENV.items():
            if key not in data.get("env", {}):
                setattr(cfg.env, key, value)
        return cfg

    # -- the checkpoint -------------------------------------------------------------------
    def save(self, cfg: Config, optimizer, totals: Totals, history: list[dict], policy=None,
             obs_norm=None, arch: dict | None = None) -> None:
        """Checkpoint first, then the files derived from it (``policy``: the run's
        ``BatchedPolicy``, its layout and VBN reference batch; ``obs_norm``: the shared
        observation normaliser; ``arch``: the exported net's)."""
        ident = identity(cfg)
        reference = None if policy is None else policy.reference_batch
        save_file(self.checkpoint, {
            "optimizer": optimizer.state_dict(), "totals": totals, "history": history,
            "obs_norm": None if obs_norm is None else obs_norm.state_dict(),
            "vbn_reference": None if reference is None else reference.cpu(),
            "identity": ident}, meta={"format": STATE_FORMAT})
        self.write_metrics(history)
        self.write_policy(optimizer, totals, policy, obs_norm, arch)

    def write_policy(self, optimizer, totals: Totals, policy, obs_norm, arch) -> None:
        """``elite.json`` and ``policy.safetensors`` from the optimizer's state."""
        params = optimizer.deployed_params()
        if optimizer.deploys == "elite" and params is not None:
            atomic_write(self.file("elite.json"), optimizer.elite.to_json(
                score=finite(optimizer.elite_score), generation=totals.generation - 1,
                noise=optimizer.noise.spec, num_params=optimizer.num_params))
        if params is not None and policy is not None and arch is not None:
            atomic_write(self.file("policy.safetensors"), policy_bytes(
                policy.spec.unflatten(params), arch, totals.generation - 1, obs_norm,
                policy.reference_batch))

    def load(self, cfg: Config | None = None) -> dict:
        """The checkpoint's state; with ``cfg``, refused unless it defines the same run."""
        legacy = os.path.join(self.path, "checkpoint", "state.pt")
        if not self.has_checkpoint():
            if os.path.exists(legacy):
                raise CheckpointError(f"{legacy} is a pickle checkpoint of an older neuroevo; "
                                      "it is not loaded, since unpickling can run code: start "
                                      "the run again")
            raise CheckpointError(f"{self.path} has no checkpoint yet (it stopped before its "
                                  "first generation ended); start it again with 'neuroevo run'")
        _, state = load_file(self.checkpoint, state_types(), STATE_FORMAT)
        if not isinstance(state, dict) or not isinstance(state.get("totals"), Totals):
            raise CheckpointError(f"{self.checkpoint} holds no neuroevo run state")
        try:
            check_parts(state)
        except CheckpointError as e:
            raise CheckpointError(f"{self.checkpoint}: {e}; {DAMAGED}") from None
        if cfg is not None:
            self.check_identity(cfg, state.get("identity") or {})
        return state

    @contextlib.contextmanager
    def loading(self):
        """Objects taking in this run's checkpoint (an optimizer checks its state whole
        before it takes any of it): a refusal names the checkpoint's file."""
        try:
            yield
        except CheckpointError as e:
            raise CheckpointError(f"{self.checkpoint}: {e}") from None

    def restore(self, built, state: dict) -> None:
        """``built.restore(state)``, a refusal naming this run's checkpoint."""
        with self.loading():
            built.restore(state)

    def check_identity(self, cfg: Config, saved: dict) -> None:
        """Refuse a config that defines another run than the checkpoint's (budget and machine
        layout may change)."""
        mine, saved = identity(cfg), _legacy_algo(saved, "algo.")
        for key, off in LEGACY_OFF.items():  # saved before the setting: it ran without
            if f"env.{key}" not in saved:
                saved = {**saved, f"env.{key}": None if saved.get("env.id") else off}
        saved = {**{f"env.{k}": v for k, v in LEGACY_ENV.items()},
                 **{f"net.{k}": v for k, v in LEGACY_NET.items()}, **saved}
        changed = sorted(k for k in set(mine) | set(saved) if mine.get(k) != saved.get(k))
        if not changed:  # a key one side lacks is None (an algorithm's key it does not use)
            return
        shown = ", ".join(f"{k}: {saved.get(k)!r} -> {mine.get(k)!r}" for k in changed[:3])
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise CheckpointError(f"the config differs from the run its checkpoint saved ({shown}"
                              f"{more}); only the budget and the machine layout may change on "
                              "resume: restore config.yaml, or start a new run")

    def write_metrics(self, history: list[dict]) -> None:
        rows = [finite(r) for r in history]
        atomic_write(self.file("metrics.jsonl"),
                     "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
        out = io.StringIO()
        present = {key for r in rows for key in r}  # the run's algorithm's own columns
        extra = tuple(m for m in ALGORITHMS.metrics() if m.name in present)
        writer = csv.DictWriter(out, columns(extra), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(self.file("metrics.csv"), out.getvalue())


class Checkpoints(Callback):
    """The training driver's callback that checkpoints ``built`` (a ``neuroevo.build.Built``)
    into ``run_dir`` after every generation, with the files derived from the checkpoint."""

    def __init__(self, run_dir: RunDir, built):
        self.run_dir, self.built = run_dir, built

    def checkpoint(self, totals: Totals, history: list[dict]) -> None:
        b = self.built
        self.run_dir.save(b.config, b.optimizer, totals, history, b.policy, b.obs_norm,
                          b.arch)
