"""Run directories: the resolved config, metrics, the elite and an atomic checkpoint.

Layout of a run directory::

    config.yaml          the fully resolved config (enough to rerun)
    metrics.jsonl/.csv   one row per generation
    elite.json           the elite's compact genome (GA / RS)
    policy.pt            the elite's (GA / RS) or centre's (ES) parameters and layout
    checkpoint/state.pt  optimizer state, counters and the metric rows

Every file is written to a temporary name and renamed, so a crash (even ``kill -9``) leaves
either the previous version or the new one. The checkpoint holds the metric rows too: on
resume the metric files are rewritten from it, so they never run ahead of the state.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os

import torch
import yaml

from neuroevo.config import Config, from_dict, to_dict
from neuroevo.errors import CheckpointError, ConfigError
from neuroevo.files import atomic_write
from neuroevo.loop import Totals

CSV_COLUMNS = ("generation", "frames", "episodes", "wall_time", "fitness_max", "fitness_mean",
               "fitness_min", "elite_score", "center_score", "fps", "occupancy")


class RunDir:
    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def checkpoint(self) -> str:
        return self.file(os.path.join("checkpoint", "state.pt"))

    def holds_run(self) -> bool:
        return os.path.exists(self.file("config.yaml"))

    def ensure_free(self, force: bool = False) -> None:
        """Refuse to start a new run over an existing one unless ``force``."""
        if self.holds_run() and not force:
            raise ConfigError(f"run directory {self.path} already holds a run; resume it with "
                              f"'neuroevo resume {self.path}', pick another --run-dir, or "
                              "pass --force to overwrite it")

    def create(self, cfg: Config, force: bool = False) -> None:
        self.ensure_free(force)
        os.makedirs(self.file("checkpoint"), exist_ok=True)
        if force and os.path.exists(self.checkpoint):
            os.remove(self.checkpoint)
        self.write_config(cfg)
        self.write_metrics([])

    def write_config(self, cfg: Config) -> None:
        atomic_write(self.file("config.yaml"), yaml.safe_dump(to_dict(cfg), sort_keys=False))

    def load_config(self) -> Config:
        if not os.path.isdir(self.path):
            raise CheckpointError(f"run directory {self.path} does not exist; give the "
                                  "directory that 'neuroevo run' printed")
        try:
            with open(self.file("config.yaml")) as f:
                return from_dict(yaml.safe_load(f))
        except (OSError, yaml.YAMLError, AttributeError, ConfigError) as e:
            raise CheckpointError(f"{self.file('config.yaml')} is missing or corrupt ({e}); "
                                  "this is not a neuroevo run directory") from None

    def save(self, optimizer, totals: Totals, history: list[dict], spec=None,
             obs_norm=None) -> None:
        """Checkpoint first, then the files derived from it (``spec``: the policy's layout;
        ``obs_norm``: the shared observation normaliser, when the run has one)."""
        norm = None if obs_norm is None else obs_norm.state_dict()
        buffer = io.BytesIO()
        torch.save({"optimizer": optimizer.state_dict(), "totals": dataclasses.asdict(totals),
                    "history": history, "obs_norm": norm}, buffer)
        atomic_write(self.checkpoint, buffer.getvalue())
        self.write_metrics(history)
        elite = getattr(optimizer, "elite", None)
        if elite is not None:
            atomic_write(self.file("elite.json"), elite.to_json(
                score=optimizer.state.elite_score, generation=totals.generation - 1,
                noise=optimizer.noise.spec, num_params=optimizer.num_params))
            params = optimizer.decoder().decode(elite)
        else:
            params = getattr(optimizer, "center", None)
        if params is not None and spec is not None:
            # Usable without neuroevo's genomes: torch.load(...)["params"] as named tensors.
            buffer = io.BytesIO()
            torch.save({"params": {k: v.clone() for k, v in spec.unflatten(params).items()},
                        "generation": totals.generation - 1,
                        # inputs are (obs - mean) / std clipped to +/-clip, when present
                        "obs_norm": None if obs_norm is None else {
                            "mean": obs_norm.mean.float(), "std": obs_norm.std.float(),
                            "clip": obs_norm.clip}}, buffer)
            atomic_write(self.file("policy.pt"), buffer.getvalue())

    def load(self) -> dict:
        if not os.path.exists(self.checkpoint):
            raise CheckpointError(f"{self.path} has no checkpoint yet (it stopped before its "
                                  "first generation ended); start it again with 'neuroevo run'")
        try:
            state = torch.load(self.checkpoint, weights_only=False)
            state["totals"] = Totals(**state["totals"])
            return state
        except Exception as e:
            raise CheckpointError(f"checkpoint {self.checkpoint} is corrupt ({e}); "
                                  "restore it from a backup or start the run again") from None

    def write_metrics(self, history: list[dict]) -> None:
        atomic_write(self.file("metrics.jsonl"), "".join(json.dumps(r) + "\n" for r in history))
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(history)
        atomic_write(self.file("metrics.csv"), out.getvalue())
