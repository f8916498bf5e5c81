"""The package's import graph has no circle: every import of a `travel` module by another, at module level or
inside a function, read from the source with `ast` (imports under `if TYPE_CHECKING:` are type names only and
load nothing, so they are left out)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "travel"


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The project modules an import statement loads (the longest existing module of each dotted name)."""
    if isinstance(node, ast.Import):
        dotted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        dotted = [f"{base}.{alias.name}" for alias in node.names] + [base]
    found = set()
    for name in dotted:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.startswith("travel") and name in modules:
            found.add(name)
    return found


def type_only(tree: ast.Module) -> set[int]:
    """The ids of import nodes under `if TYPE_CHECKING:`."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = type_only(tree)
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                edges |= imported(node, modules)
        graph[name] = edges - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_the_package_imports_itself_through_others():
    graph = import_graph()
    assert len(graph) > 100 and "travel.checkpoint.evaluate_saved" in graph["travel.run"]  # function-local ones count
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_a_function_local_import_of_the_package_says_why_it_is_deferred():
    """Imports sit at the top of a module; one inside a function only defers a heavy module (transformers, the
    decoder, its optional kernels), and the comment above it (or above the run of imports it ends) says so."""
    unexplained, modules = [], module_names()
    for name, path in modules.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        skipped = type_only(tree)
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                    above = node.lineno - 2
                    while above > 0 and lines[above].strip().startswith(("from ", "import ")):
                        above -= 1  # one comment explains a run of imports
                    if imported(node, modules) and not lines[above].strip().startswith("# deferred"):
                        unexplained.append(f"{name}:{node.lineno}")
    assert unexplained == []


def test_importing_the_decoder_loads_none_of_its_optional_kernels():
    """travel/generation/kernels/ loads where an option selects a module of it, never with the decoder."""
    import subprocess
    import sys

    code = "import sys, travel.generation.decoder; print([m for m in sys.modules if m.startswith('travel.generation.kernels')])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
