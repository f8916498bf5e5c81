"""Per-iteration actor checkpoints for the `history` comparator, pruned to what it can still ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from travel.checkpoint.store import load_plain, save_plain
from travel.io import atomic_directory, remove_directory


def _cpu_state(model: Any) -> dict[str, Any]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


class PolicyCheckpoints:
    """Per-iteration actor checkpoints in `<dir>/initial` and `<dir>/iteration_NNNN` (one file per agent, each
    iteration's directory renamed into place complete, travel.io.atomic_directory), pruned to the ones a later
    `history` comparator can still ask for."""

    def __init__(self, directory: str | Path, history_k: int):
        self.directory = Path(directory)
        self.history_k = history_k

    @staticmethod
    def label(iteration: int) -> str:
        return "initial" if iteration <= 0 else f"iteration_{iteration:04d}"

    def path(self, iteration: int, agent_id: int) -> Path:
        return self.directory / self.label(iteration) / f"agent_{agent_id}.pt"

    def save(self, iteration: int, models: Sequence[Any]) -> None:
        """Checkpoint the actors as they are at the end of `iteration` (0: before training)."""
        with atomic_directory(self.directory / self.label(iteration)) as version:
            for agent_id, model in enumerate(models):
                save_plain(_cpu_state(model), version / f"agent_{agent_id}.pt")
        self._prune(iteration + 1)

    def _prune(self, next_iteration: int) -> None:
        oldest_needed = max(0, next_iteration - self.history_k)
        for directory in self.directory.iterdir():
            if directory.name.startswith("."):  # a save that never completed
                continue
            number = 0 if directory.name == "initial" else int(directory.name.split("_")[-1])
            if number < oldest_needed:
                remove_directory(directory)

    def source_iteration(self, iteration: int) -> int:
        """The checkpoint iteration the comparator of `iteration` (1-based) uses."""
        return max(0, iteration - self.history_k)

    def load(self, iteration: int, agent_id: int) -> dict[str, Any]:
        path = self.path(iteration, agent_id)
        if not path.is_file():
            raise FileNotFoundError(f"no policy checkpoint {path} for comparator history_k={self.history_k}")
        return load_plain(path)
