"""Every name a benchmark imports from commopt exists: the benchmarks import inside their
functions (``make bench`` only), so a renamed helper would otherwise surface there only
(bench_io imported a JSON-loader helper for months after it had moved)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) of every ``from commopt... import name`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module, alias.name, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            and node.module.split(".")[0] == "commopt" for alias in node.names]


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_commopt_name_a_benchmark_imports_exists(path: Path) -> None:
    for module, name, line in _imports(path):
        mod = importlib.import_module(module)
        if hasattr(mod, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")  # a submodule
        except ImportError:
            pytest.fail(f"{path.name}:{line} imports {name!r} from {module}, which has no such name")
