"""Nothing in a run directory runs code when loaded: a real pickle payload in every file."""

import json
import os
import pickle
import shutil

import pytest
from faultkit import neuroevo, one_line_error


class Payload:
    """Unpickling this creates the file ``marker``: the proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_the_payload_is_real(tmp_path):
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(Payload(marker)))  # the control: unpickled, it runs
    assert marker.exists()


# (file in the run directory, the commands that read it)
FILES = [("checkpoint/state.safetensors", (["resume", "r"], ["play", "r", "--episodes", "1"])),
         ("config.yaml", (["resume", "r"], ["play", "r", "--episodes", "1"])),
         ("metrics.jsonl", (["plot", "r", "-o", "x.png"],))]


@pytest.mark.parametrize("name,commands", FILES)
def test_a_pickle_in_a_run_file_is_refused_and_never_runs(tmp_path, one, name, commands):
    for command in commands:
        shutil.copytree(one, tmp_path / "r", dirs_exist_ok=True)
        marker = tmp_path / "ran"
        (tmp_path / "r" / name).write_bytes(pickle.dumps(Payload(marker)))
        out = neuroevo(*command, cwd=tmp_path)
        one_line_error(out, name.split("/")[-1])
        assert not marker.exists(), command


def test_a_yaml_tag_that_builds_objects_is_refused(tmp_path, one):
    shutil.copytree(one, tmp_path / "r")
    marker = tmp_path / "ran"
    config = tmp_path / "r" / "config.yaml"
    config.write_text(f"seed: !!python/object/apply:os.system ['touch {marker}']\n"
                      + config.read_text())
    one_line_error(neuroevo("resume", "r", cwd=tmp_path), "config.yaml")
    assert not marker.exists()
    (tmp_path / "c.yaml").write_text(f"seed: !!python/object/apply:os.system ['touch {marker}']")
    one_line_error(neuroevo("run", "ga", "--config", "c.yaml", cwd=tmp_path), "c.yaml")
    assert not marker.exists()


def test_an_old_pickle_checkpoint_is_never_loaded(tmp_path, one):
    shutil.copytree(one, tmp_path / "r")
    marker = tmp_path / "ran"
    os.remove(tmp_path / "r" / "checkpoint" / "state.safetensors")
    (tmp_path / "r" / "checkpoint" / "state.pt").write_bytes(pickle.dumps(Payload(marker)))
    one_line_error(neuroevo("resume", "r", cwd=tmp_path), "state.pt", "pickle")
    assert not marker.exists()


def test_a_crafted_safetensors_naming_another_type_is_refused(tmp_path, one):
    from safetensors.torch import save

    shutil.copytree(one, tmp_path / "r")
    state = {"$type": "system", "fields": {"command": "touch ran"}}
    (tmp_path / "r" / "checkpoint" / "state.safetensors").write_bytes(save(
        {}, metadata={"format": "neuroevo.checkpoint/2", "state": json.dumps(state)}))
    one_line_error(neuroevo("resume", "r", cwd=tmp_path), "'system' is not one a checkpoint")


def test_the_exported_policy_loads_without_pickle_and_refuses_one(tmp_path, one):
    import torch

    from neuroevo.errors import CheckpointError
    from neuroevo.policy.export import load_policy

    policy = load_policy(str(one / "policy.safetensors"))
    assert policy.act(torch.zeros(3, 4)).shape == (3,) and policy.arch["net"] == "mlp"
    marker = tmp_path / "ran"
    bad = tmp_path / "policy.safetensors"
    bad.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError, match=r"policy.safetensors is not a neuroevo policy "
                       r"file \(.*\); copy policy.safetensors again from the run directory"):
        load_policy(str(bad))
    assert not marker.exists()


def test_elite_json_and_the_lock_file_are_read_as_text_only(tmp_path, one):
    from neuroevo.errors import ConfigError
    from neuroevo.genomes import SeedChain

    shutil.copytree(one, tmp_path / "r")
    marker = tmp_path / "ran"
    payload = pickle.dumps(Payload(marker))
    with pytest.raises(ConfigError, match=r"not a neuroevo\.seedchain/1 genome document"):
        SeedChain.from_json(payload.decode("latin-1"))
    (tmp_path / "r" / ".lock").write_bytes(payload)  # only ever read as the holder's PID
    out = neuroevo("resume", "r", "--generations", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
