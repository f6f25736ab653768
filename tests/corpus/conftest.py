"""Shared fixtures of the corpus tests: each corpus graph optimized once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

import commopt
from tests.corpus.graphs import CorpusGraph

_OPTIMIZED: dict[str, Path] = {}


def optimized_dir(graph: CorpusGraph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Output folder of ``commopt.optimize`` (default options) on ``graph``; run once per session."""
    if graph.id not in _OPTIMIZED:
        out = tmp_path_factory.mktemp(f"opt_{graph.id}")
        commopt.optimize(graph.path, output_dir=out, timings=False)
        _OPTIMIZED[graph.id] = out
    return _OPTIMIZED[graph.id]
