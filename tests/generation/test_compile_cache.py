"""hardware.compile_cache_dir (`use_compile_cache` in travel/generation/compiled_forward.py): a run points
TorchInductor's cache at the option's directory, and a later process that compiles the same graph loads it there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import compose_config
from travel.generation.compiled_forward import use_compile_cache
from travel.run import Run

# compiles one small function and prints TorchInductor's FX graph cache hits and misses
COMPILE_ONCE = """
import torch
from torch._dynamo.utils import counters
compiled = torch.compile(lambda x: torch.sin(x) * 2 + x.sum())
compiled(torch.ones(8))
print(counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"])
"""


@pytest.fixture
def restored_cache_variable(monkeypatch):
    """The cache variable as the test found it, whatever the test sets."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))
    if not os.environ["TORCHINDUCTOR_CACHE_DIR"]:
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")


def test_a_run_points_the_compile_cache_at_the_option_and_null_keeps_torchs_choice(tmp_path, monkeypatch, restored_cache_variable):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")
    Run(compose_config("hardware=cpu", "hardware.compile_cache_dir=null"), run_dir=str(tmp_path / "a"))._prepare_torch()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"
    Run(compose_config("hardware=1xb200"), run_dir=str(tmp_path / "b"))._prepare_torch()
    expected = tmp_path / ".cache" / "travel-collab" / "torchinductor"  # the preset's ~ expanded
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(expected) and expected.is_dir()


def test_a_cache_directory_that_cannot_be_made_is_named(tmp_path, restored_cache_variable):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match="hardware.compile_cache_dir=.*file/cache.*cannot create it"):
        use_compile_cache(str(blocker / "cache"))


def test_the_next_process_loads_a_compiled_graph_from_the_cache(tmp_path, restored_cache_variable):
    cache = use_compile_cache(str(tmp_path / "cache"))
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def compile_in_a_process() -> tuple[int, int]:
        done = subprocess.run([sys.executable, "-c", COMPILE_ONCE], env=environment, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        hits, misses = done.stdout.split()[-2:]
        return int(hits), int(misses)

    assert compile_in_a_process() == (0, 1)
    assert any(cache.rglob("*")), "the first process wrote nothing to the cache"
    assert compile_in_a_process() == (1, 0)
