"""Every `python launch.py ...` command that README.md and docs/ show composes and passes the checks a training
run makes, as `mode=dry` (Hydra's own sweep expansion for `--multirun` lines, each job checked). Placeholders
take the shared train file (`/path/to/train.jsonl`) and a dummy model directory; a command left to the default
data, which comes from the hub, checks against the synthetic rows instead; `<name>` stands for each algorithm."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, compose_config, require_shared_data
from travel.run import Run

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
ALGORITHMS = sorted(path.stem for path in (REPO_ROOT / "conf" / "algorithm").glob("*.yaml"))
COMMAND = "python launch.py"


def commands_in(text: str) -> list[str]:
    """The launch commands of a Markdown text: lines of its code blocks (a trailing backslash continues one, a
    `#` ends it) and inline code spans, across line breaks."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if COMMAND in line:
                found.append(line[line.index(COMMAND):].split(" #")[0].strip())
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`(python launch\.py[^`]*)`", outside):
        found.append(" ".join(span.split()))
    return found


def documented_commands() -> list[tuple[str, str]]:
    """(document, command) for every launch command shown, without those written as templates (`...`) and the
    `mode=eval` ones, which evaluate a finished run: tests/checkpoint/test_resume.py runs that one on the smoke
    run's directory."""
    commands = []
    for path in DOCUMENTS:
        for command in commands_in(path.read_text(encoding="utf-8")):
            if "..." not in command and "mode=eval" not in command:
                commands.append((path.relative_to(REPO_ROOT).as_posix(), command))
    return commands


def job_overrides(arguments: list[str]) -> list[list[str]]:
    """Each job's overrides: one for a single run, Hydra's basic sweeper's expansion for --multirun."""
    multirun = any(flag in arguments for flag in ("--multirun", "-m"))
    overrides = [a for a in arguments if a not in ("--multirun", "-m")]
    if not multirun:
        return [overrides]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def substituted(command: str, train: Path, model_dir: Path) -> list[list[str]]:
    """The command's argument lists with the placeholders filled (several for `<name>`)."""
    command = command.replace("/path/to/train.jsonl", str(train))
    command = re.sub(r"model\.path=\S+", f"model.path={model_dir}", command)
    arguments = shlex.split(command)[2:]
    if any("<name>" in a for a in arguments):
        return [[a.replace("<name>", name) for a in arguments] for name in ALGORITHMS]
    return [arguments]


def test_the_documents_show_launch_commands():
    """The parser finds the commands it should: the README's quick start, a sweep and a continued line."""
    commands = [command for _, command in documented_commands()]
    assert "python launch.py experiment=smoke" in commands
    assert any(c.startswith("python launch.py --multirun seed=1,2,3") for c in commands)
    assert any("smollm2_gpu_learning" in c and "seed=1,2" in c and "hydra.sweep.dir" in c for c in commands)
    assert "python launch.py mode=dry algorithm=<name>" in commands
    assert len(commands) >= 15


@pytest.mark.parametrize("document, command", documented_commands())
def test_every_documented_command_passes_a_dry_run(document, command, tmp_path):
    train = require_shared_data() / "train.jsonl"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    jobs = [overrides for arguments in substituted(command, train, model_dir) for overrides in job_overrides(arguments)]
    for job, overrides in enumerate(jobs):
        cfg = compose_config(*overrides, "mode=dry")
        if cfg.data._target_.endswith("HubSource"):  # the hub is not reachable from the tests
            cfg = compose_config(*overrides, "data=synthetic", "mode=dry")
        report = Run(cfg, run_dir=str(tmp_path / f"job_{job}"))()
        assert report["env_steps"] > 0 and report["memory_plan"]["model"] == cfg.model.name, (document, overrides)
