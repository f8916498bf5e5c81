"""The documents stay references a newcomer reads in one sitting: the README at most 300 lines (set-up, main
commands, layout and results; details in docs/), docs/performance.md at most 25 KB (each option's best figure,
not its history, which git keeps)."""

from tests.conftest import REPO_ROOT


def test_the_readme_and_the_performance_reference_stay_short():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 300, f"README.md has {len(readme)} lines: move details into docs/"
    size = (REPO_ROOT / "docs" / "performance.md").stat().st_size
    assert size <= 25_000, f"docs/performance.md is {size} bytes: keep each option's best figure, not its history"
    headings = [line for line in readme if line.startswith("## ")]
    assert headings[:3] == ["## Set up and run", "## Layout", "## Running experiments"]  # the layout near the top
