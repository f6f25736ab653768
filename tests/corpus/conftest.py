"""Shared fixtures of the corpus tests: each corpus graph optimized once per session, and one
torchrun launch per world size that runs every runnable graph's archives and runner."""

from __future__ import annotations

from pathlib import Path

import pytest

import commopt
from tests.codegen.conftest import launch_runners
from tests.corpus.graphs import CorpusGraph, runnable

_OPTIMIZED: dict[str, Path] = {}
_LAUNCHED: dict[int, Path] = {}
_STATUS: dict[str, list[str]] = {}


def optimized_dir(graph: CorpusGraph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Output folder of ``commopt.optimize`` (default options) on ``graph``; run once per session."""
    if graph.id not in _OPTIMIZED:
        out = tmp_path_factory.mktemp(f"opt_{graph.id}")
        commopt.optimize(graph.path, output_dir=out, timings=False)
        _OPTIMIZED[graph.id] = out
    return _OPTIMIZED[graph.id]


def runner_launch(world: int, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """One torchrun launch of ``world`` gloo ranks, once per session, running every runnable
    graph of that size (:func:`tests.codegen.conftest.launch_runners`): the original archive
    eagerly, the archive ``commopt.optimize`` wrote eagerly, and the generated runner with
    ``--verify``. Returns the folder of their outputs and each graph's status per rank."""
    if world not in _LAUNCHED:
        work = tmp_path_factory.mktemp(f"runners_ws{world}")
        cases = []
        for g in runnable(world):
            out = optimized_dir(g, tmp_path_factory)
            (runner,) = out.glob("run_*.py")
            cases.append((g.id, str(g.path), str(runner), str(out / g.path.name)))
        _STATUS.update(launch_runners(cases, world, work))
        _LAUNCHED[world] = work
    return _LAUNCHED[world], _STATUS
