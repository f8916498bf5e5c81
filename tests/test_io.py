"""travel/io.py: atomic files and directories. A process killed with SIGKILL at a random point of an actor save
leaves the previous saved actor or the complete new one, never a partial directory."""

import json
import random
import time

import pytest
import torch

from tests.kill import kill_at_random_point
from travel.agents.actors import Actor
from travel.agents.models import build_tiny_random
from travel.io import atomic_directory, versioned_directory, write_json_atomic

TRIALS = 24


def test_an_atomic_json_write_replaces_the_file_only_when_complete(tmp_path):
    path = tmp_path / "a.json"
    write_json_atomic(path, {"x": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"x": object()})
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failed_directory_write_keeps_the_previous_version(tmp_path):
    target = tmp_path / "agent_0"
    with versioned_directory(target) as version:
        (version / "weights").write_text("old")
    with pytest.raises(RuntimeError):
        with versioned_directory(target) as version:
            (version / "weights").write_text("new, half")
            raise RuntimeError("killed")
    assert (target / "weights").read_text() == "old"
    assert len(list(tmp_path.iterdir())) == 2  # the link and its one version


def test_a_write_once_directory_appears_complete_or_not_at_all(tmp_path):
    target = tmp_path / "iteration_0001"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as partial:
            (partial / "agent_0.pt").write_text("half")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    with atomic_directory(target) as partial:
        (partial / "agent_0.pt").write_text("a")
        assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["iteration_0001"] and not target.is_symlink()


def _actor(seed):
    loaded = build_tiny_random(seed=seed)
    return Actor(0, loaded.model, loaded.tokenizer, optimizer=None, device=torch.device("cpu"), decoder=None)


def _save_forever(actors, directory, saved):
    """The child: saves the two actors in turn into the same directory until it is killed, counting saves."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    while True:
        for actor in actors:
            actor.save(directory)
            with saved.get_lock():
                saved.value += 1


def _weights(directory):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory)
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_sigkill_at_any_point_of_an_actor_save_leaves_a_complete_actor(tmp_path):
    from transformers import AutoTokenizer

    actors = [_actor(1), _actor(2)]
    directory = tmp_path / "actors" / "agent_0"
    actors[0].save(directory)
    versions = [{k: v.clone() for k, v in actor.model.state_dict().items()} for actor in actors]
    one_save = time.perf_counter()
    actors[1].save(directory)
    one_save = time.perf_counter() - one_save
    rng = random.Random(0)
    seen = set()
    for trial in range(TRIALS):
        # complete saves before the kill: 0, 1 or 2, then a random point of the next
        kill_at_random_point(_save_forever, (actors, directory), rng, most_done=3, pause_s=1.5 * one_save)
        weights = _weights(directory)
        matches = [i for i, version in enumerate(versions) if all(torch.equal(weights[k], version[k]) for k in version)]
        assert len(matches) == 1, "the saved actor is neither the previous nor the new one"
        seen.add(matches[0])
        AutoTokenizer.from_pretrained(directory)  # the tokenizer is complete too
    assert seen == {0, 1}  # kills landed in both orders of the two versions


def test_every_file_written_atomically_gets_the_mode_open_would_give(tmp_path):
    """mkstemp creates 0600 files; an atomic write leaves the umask's mode, like every other file of a run."""
    import os
    import stat

    from travel.io import FILE_MODE, write_text_atomic

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = write_text_atomic(tmp_path / "status", "running\n")
    assert stat.S_IMODE(os.stat(written).st_mode) == stat.S_IMODE(os.stat(plain).st_mode) == FILE_MODE
