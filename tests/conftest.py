"""Shared pytest fixtures and helpers: the project's config composed as launch.py composes it, and the real
TravelPlanner files beside the repository, when present."""

import os
from pathlib import Path

import pytest
import torch


def patch_language_once_per_launch() -> None:
    """Triton's interpreter patches triton.language for a launch, and again at every device-function call inside it,
    though the launch's patch is still in place (up to a third of an interpreted decode test's time): here a call
    inside a launch reuses the patch of each language module that is patched already (a device function of another
    module may see another one, as triton.language.standard sees triton.language.core). Left as it is where the
    interpreter's internals differ."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:  # no triton: its tests skip
        return
    patch, launch = getattr(interpreter, "_patch_lang", None), getattr(interpreter.GridExecutor, "__call__", None)
    if patch is None or launch is None or getattr(patch, "once_per_launch", False):
        return
    patched: set[int] | None = None  # the language modules patched in the launch under way, None outside launches

    class Unpatched:
        def restore(self) -> None:
            pass

    def patch_once(fn):
        modules = {id(value) for value in fn.__globals__.values() if value is tl or value is tl.core}
        if patched and modules <= patched:  # the launch's own call patches whatever its kernel sees
            return Unpatched()
        if patched is not None:
            patched.update(modules)
        return patch(fn)

    def launch_patching_once(self, *args, **kwargs):
        nonlocal patched
        patched = set()
        try:
            return launch(self, *args, **kwargs)
        finally:
            patched = None

    patch_once.once_per_launch = True
    interpreter._patch_lang = patch_once
    interpreter.GridExecutor.__call__ = launch_patching_once


if not torch.cuda.is_available():
    # Triton's interpreter runs the project's Triton kernels on CPU tensors (travel/generation/triton_varlen.py); it
    # is read when triton is imported, so it is set before any test module imports it. A GPU runs the compiled kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")
    patch_language_once_per_launch()

# Each xdist worker takes its share of torch's intra-op threads: with a thread per core in every worker, the
# workers' threads contend for the cores (the generation tests ran about 7% faster on two cores with one thread each).
torch.set_num_threads(max(1, torch.get_num_threads() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF = REPO_ROOT / "conf"
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "travelplanner"


def compose_config(*overrides: str, hydra: bool = False, config_dir: Path = CONF):
    """conf/config.yaml with `overrides`, after registering the algorithms (their experiment presets);
    `hydra=True` keeps the `hydra` node."""
    from hydra import compose, initialize_config_dir

    from travel.algorithms.core.registry import load_algorithms

    load_algorithms(overrides)
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


@pytest.fixture
def one_torch_thread():
    """A tiny model is dominated by intra-op thread hand-offs on a small, shared machine: one thread."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def require_shared_data() -> Path:
    """The real data directory; skips the test where it is absent, fails when CI requires it."""
    if (SHARED_DATA_DIR / "train.jsonl").is_file():
        return SHARED_DATA_DIR
    reason = f"real TravelPlanner files not found at {SHARED_DATA_DIR}"
    if os.environ.get("TRAVEL_REQUIRE_SHARED_DATA") == "1":
        pytest.fail(reason + " (TRAVEL_REQUIRE_SHARED_DATA=1)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    return require_shared_data()


@pytest.fixture(scope="session")
def real_train_rows(shared_data_dir):
    from travel.data import load_rows

    return load_rows(str(shared_data_dir / "train.jsonl"))


def once_per_run(tmp_path_factory, name: str, build):
    """A session-wide result computed once even across pytest-xdist workers: the first worker to ask builds it
    (`build(directory) -> JSON-able`) under a file lock in the directory all workers share, the others wait and
    read it back."""
    import json

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    with FileLock(f"{shared}.lock"):
        result_file = shared / "result.json"
        if result_file.is_file():
            return json.loads(result_file.read_text())
        shared.mkdir(exist_ok=True)
        result = build(shared)
        result_file.write_text(json.dumps(result))
        return result


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """`python launch.py experiment=smoke logger=wandb logger.mode=offline`, run once per test run: the main job's
    end-to-end test reads it, and the resume, requeue and mode=eval tests compare against it. Returns (run_dir,
    result)."""
    import subprocess
    import sys

    def build(cwd: Path) -> dict:
        env = {**os.environ, "WANDB_SILENT": "true"}
        result = subprocess.run(
            [sys.executable, str(REPO_ROOT / "launch.py"), "experiment=smoke", "logger=wandb", "logger.mode=offline"],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
        (run_dir,) = (cwd / "outputs" / "magrpo").iterdir()
        return {"run_dir": str(run_dir), "args": result.args, "stdout": result.stdout, "stderr": result.stderr}

    done = once_per_run(tmp_path_factory, "smoke", build)
    return Path(done["run_dir"]), subprocess.CompletedProcess(done["args"], 0, done["stdout"], done["stderr"])


@pytest.fixture(scope="session")
def preference_smoke_runs(tmp_path_factory):
    """The reduced smoke run of each preference algorithm (tests/preference_runs.py), run once per test run:
    {algorithm: (run_dir, stdout)}."""
    from tests.preference_runs import run_all

    def build(base: Path) -> dict:
        return {algorithm: [str(run_dir), stdout] for algorithm, (run_dir, stdout) in run_all(base).items()}

    done = once_per_run(tmp_path_factory, "preference_smoke", build)
    return {algorithm: (Path(run_dir), stdout) for algorithm, (run_dir, stdout) in done.items()}


# Session-wide runs that several test files read: each file that reads one joins its xdist group, so that run
# happens on one worker and nobody waits for it; every other file is its own group (what --dist loadfile does).
SHARED_RUNS = ("preference_smoke_runs", "smoke_run")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    shared = {}
    for item in items:
        for name in SHARED_RUNS:
            if name in getattr(item, "fixturenames", ()):
                shared.setdefault(item.module.__name__, name)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(shared.get(item.module.__name__, item.module.__name__)))
    # the longest work goes out first (the shared runs' groups, then files marked end_to_end), so the short
    # files fill in beside it instead of one long file running alone at the end
    items.sort(key=lambda item: 0 if item.module.__name__ in shared else 1 if item.get_closest_marker("end_to_end") else 2)
