"""Checkpoints are data, checked before use: every file's digest is recorded and verified (resume=auto falls back
to the newest checkpoint that verifies, saying which it skipped and why), and the optimizer, RNG and preference
states load with `weights_only=True`, so a file that would run code when unpickled is refused, not run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from travel.agents.layouts import build_layout
from travel.agents.models import build_tiny_random
from travel.algorithms.online.marlhf import REWARD_MODEL_FILE
from travel.algorithms.preference.policy_checkpoints import PolicyCheckpoints
from travel.algorithms.preference.checkpoint import PREFERENCE_STATE, restore_preference_state
from travel.checkpoint.store import (
    DIGESTS,
    CheckpointError,
    CheckpointStore,
    file_digests,
    load_checkpoint,
    load_plain,
    resolve_resume,
)
from travel.io import write_json_atomic

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Payload:
    """Unpickling it creates `marker`: what a crafted checkpoint file could do instead."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def trained_layout():
    """A tiny layout whose optimizers hold state (one step each)."""
    generation = {"max_new_tokens": 320, "max_value_tokens": 4, "temperature": 0.7, "top_p": 0.8}
    layout = build_layout(lambda **kw: build_tiny_random(seed=0), {"agent_devices": ["cpu", "cpu"]}, generation, learning_rate=1e-3, seed=0)
    for actor in layout.actors:
        ids = torch.arange(1, 9).reshape(1, -1)
        actor.model(input_ids=ids, labels=ids).loss.backward()
        actor.optimizer.step()
    return layout


def store_in(directory: Path) -> CheckpointStore:
    return CheckpointStore(directory, keep=2, meta={"algorithm": "magrpo", "layout": "decentralized"})


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A run directory with checkpoints at env steps 4 and 8 of the trained tiny layout."""
    layout, store = trained_layout(), store_in(tmp_path)
    for env_step in (4, 8):
        store.save(env_step, layout, {"trainer": "magrpo"})
    return tmp_path


def newest(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "env_step_8"


def test_a_checkpoint_records_the_digest_of_every_file_and_verifies(run_dir):
    recorded = (newest(run_dir) / DIGESTS).read_text()
    assert {"optimizers.pt", "rng.pt", "trainer.json", "actors/agent_0/model.safetensors"} <= set(file_digests(newest(run_dir)))
    assert '"actors/agent_1/model.safetensors"' in recorded
    assert resolve_resume("auto", run_dir).env_step == 8


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda c: _flip_a_byte(c / "actors" / "agent_1" / "model.safetensors"), "model.safetensors: corrupted"),
        (lambda c: _truncate(c / "optimizers.pt"), "optimizers.pt: corrupted"),
        (lambda c: (c / "trainer.json").unlink(), "trainer.json: missing"),
        (lambda c: (c / DIGESTS).write_text("{"), f"{DIGESTS}: cannot be read"),
    ],
)
def test_resume_auto_skips_a_damaged_checkpoint_for_the_newest_that_verifies(run_dir, damage, named, capsys):
    damage(newest(run_dir))
    assert resolve_resume("auto", run_dir).env_step == 4
    said = capsys.readouterr().out
    assert f"resume=auto: skipping {newest(run_dir)}: " in said and named in said
    with pytest.raises(CheckpointError, match=named):
        load_checkpoint(newest(run_dir))


def test_without_a_checkpoint_that_verifies_resume_names_each_reason(run_dir):
    for step in (4, 8):
        _flip_a_byte(run_dir / "checkpoints" / f"env_step_{step}" / "rng.pt")
    with pytest.raises(CheckpointError, match="no checkpoint of .* verifies .*env_step_8/rng.pt: corrupted.*env_step_4/rng.pt"):
        resolve_resume("auto", run_dir)


def _load_as_the_run_does(checkpoint: Path, name: str) -> None:
    """Load `name` of a checkpoint the way resume does."""
    if name == PREFERENCE_STATE:
        restore_preference_state(None, checkpoint)
    elif name == REWARD_MODEL_FILE:  # what MARLHF's restore_checkpoint loads into its reward model
        load_plain(checkpoint / name)
    elif name.startswith("policy_checkpoints"):
        PolicyCheckpoints(checkpoint / "policy_checkpoints", history_k=1).load(0, 0)
    else:
        load_checkpoint(checkpoint).restore(None)


@pytest.mark.parametrize(
    "name", ["optimizers.pt", "rng.pt", PREFERENCE_STATE, REWARD_MODEL_FILE, "policy_checkpoints/initial/agent_0.pt"]
)
def test_a_pickled_payload_in_a_checkpoint_file_is_refused_without_running(run_dir, name, tmp_path_factory):
    """The payload runs when unpickled (shown on a copy); with its digest recorded anew, resume still refuses it."""
    marker = tmp_path_factory.mktemp("marker") / "ran"
    live = tmp_path_factory.mktemp("live") / Path(name).name
    torch.save(Payload(marker), live)
    torch.load(live, weights_only=False)
    assert marker.exists()  # the payload is live
    marker.unlink()
    checkpoint = newest(run_dir)
    (checkpoint / name).parent.mkdir(parents=True, exist_ok=True)
    torch.save(Payload(marker), checkpoint / name)
    write_json_atomic(checkpoint / DIGESTS, file_digests(checkpoint))
    with pytest.raises(CheckpointError, match=f"{name}: refused: it holds more than tensors and plain containers"):
        _load_as_the_run_does(checkpoint, name)
    assert not marker.exists()


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture
def tiny_disk(tmp_path):
    """A 6 MiB tmpfs: room for one checkpoint of the tiny layout, not two."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_named_and_the_complete_checkpoints_stay_complete(tiny_disk):
    import errno

    from travel.io import DiskFullError

    layout, store = trained_layout(), store_in(tiny_disk)
    store.save(4, layout, {"trainer": "magrpo"})
    with pytest.raises(DiskFullError) as raised:
        store.save(8, layout, {"trainer": "magrpo"})
    assert raised.value.errno == errno.ENOSPC and "no space left on the device holding" in str(raised.value)
    assert str(tiny_disk / "checkpoints" / "env_step_8") in str(raised.value)
    assert [p.name for p in (tiny_disk / "checkpoints").iterdir()] == ["env_step_4"]  # no partial one left
    assert resolve_resume("auto", tiny_disk).env_step == 4  # and it verifies
