"""Fixtures of the runner-script tests: small graphs, golden files, torchrun launches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph

GOLDEN = Path(__file__).resolve().parent / "golden"
REPO = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/codegen/golden/* from the current generator")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are rewritten instead of compared."""
    return bool(request.config.getoption("--update-golden", default=False))


def tiny_graph() -> Graph:
    """mm -> relu -> all_reduce and an all_gather of the mm, an emulated node, two outputs."""
    b = GraphBuilder(name="tiny", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    w = b.input("w", (8, 8), role="parameter")
    y = b.compute("y", "aten.mm.default", [x, w], (4, 8))
    r = b.compute("r", "aten.relu.default", [y], (4, 8))
    ar = b.collective("ar", "all_reduce", "0", r)
    ag = b.collective("ag", "all_gather", "0", y)
    z = b.compute("z", "aten.relu.default", [x], (4, 8))
    ar_w = b.wait("ar_wait", ar)
    ag_w = b.wait("ag_wait", ag)
    e = b.compute("emu", "fancy_kernel", [ar_w], (4, 8), duration_us=20.0)
    s = b.compute("s", "aten.add.Tensor", [e, z], (4, 8))
    b.output([s, ag_w])
    return b.build()


#: An order of tiny_graph that issues both collectives before the independent relu.
TINY_ORDER = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
TINY_REORDERED = [0, 1, 2, 3, 6, 4, 5, 7, 8, 9, 10, 11]


def torchrun(script: Path, nproc: int, *args: str, cwd: Path,
             timeout_s: float = 240.0) -> subprocess.CompletedProcess[str]:
    """Start ``script`` with ``python -m torch.distributed.run`` on ``nproc`` local ranks."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0",
           str(script), *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)
