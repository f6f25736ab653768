"""The package's shape: no import cycles between its parts. Read from the source with ``ast``
(imports inside functions and under TYPE_CHECKING count: a cycle there is still a cycle in the
design)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Installed package name -> source directory (cli/ and schemas/ are installed under commopt).
PACKAGES = {"commopt": ROOT / "commopt", "commopt.cli": ROOT / "cli", "commopt.schemas": ROOT / "schemas"}


def _unit(module: str) -> str:
    """The part of the package a module belongs to: ``commopt.io.pt2`` -> ``commopt.io``."""
    return ".".join(module.split(".")[:2])


def _modules():
    for base, directory in PACKAGES.items():
        for path in sorted(directory.rglob("*.py")):
            rel = path.relative_to(directory).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([base, *parts]), path


def import_graph() -> dict[str, dict[str, str]]:
    """``{unit: {imported unit: "file:line"}}`` over every import of the package."""
    edges: dict[str, dict[str, str]] = {}
    for module, path in _modules():
        src = _unit(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names] \
                    if node.module == "commopt" else [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("commopt.") and _unit(name) != src:
                    edges.setdefault(src, {}).setdefault(_unit(name), f"{path.relative_to(ROOT)}:{node.lineno}")
    return edges


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_between_packages():
    edges = import_graph()
    cycles = _cycles(edges)
    described = [" <-> ".join(c) + ": " + "; ".join(
        f"{a} -> {b} ({edges[a][b]})" for a in c for b in c if b in edges.get(a, {})) for c in cycles]
    assert not cycles, "\n".join(described)


def test_the_checker_finds_a_cycle():
    assert _cycles({"a": {"b": "x"}, "b": {"c": "y"}, "c": {"a": "z"}, "d": {"a": "w"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": "x"}}) == []
