"""End to end on SimpleFSDP-style graphs exported here (tests/codegen/simple_fsdp.py), fp32 and
bf16 mixed precision (regressions: the bf16 runner called ``aten._to_copy.out(..., dtype=...)``
and crashed; the written .pt2 reloaded in another order than its buffer plan was made for)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import commopt
from commopt.buffers import validate_plan
from commopt.buffers.planfile import load_plan
from commopt.io import load_graph
from tests.codegen.conftest import REPO, torchrun
from tests.codegen.test_samples import WRAPPER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, object]]:
    """dtype -> (archive, optimize's output folder, its result), each exported at 2 ranks."""
    tmp = tmp_path_factory.mktemp("simple_fsdp")
    done = {}
    for dtype in ("bf16", "fp32"):
        archive = tmp / f"simple_fsdp_{dtype}.pt2"
        proc = subprocess.run([sys.executable, "-m", "tests.codegen.simple_fsdp", str(archive), "2",
                               dtype], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
        out = tmp / f"opt_{dtype}"
        done[dtype] = (archive, out, commopt.optimize(archive, output_dir=out, timings=False))
    return done


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_written_archive_reloads_in_the_planned_order(optimized, dtype: str) -> None:
    archive, out, result = optimized[dtype]
    graph = load_graph(archive)
    assert any(n.op.endswith("getitem") for n in graph.nodes)  # the case that moved on reload
    written = load_graph(out / result.summary.output)
    assert [n.name for n in written.nodes] == [result.graph.nodes[i].name for i in result.order]
    assert validate_plan(written, None, load_plan(out / "buffer_plan.json")) == []


def test_bf16_casts_write_into_their_buffers_with_copy_(optimized) -> None:
    archive, out, _ = optimized["bf16"]
    (runner,) = out.glob("run_*.py")
    text = runner.read_text(encoding="utf-8")
    assert "_to_copy.out" not in text
    casts = sum(1 for n in load_graph(archive).nodes if n.op == "aten._to_copy.default")
    assert casts and ".copy_(" in text and "zero-copy: the cast writes" in text


def test_runners_verify_and_match_the_eager_archives_under_gloo(optimized, tmp_path: Path) -> None:
    cases = []
    for archive, out, _ in optimized.values():
        (runner,) = out.glob("run_*.py")
        cases.append((archive.stem, str(archive), str(runner)))
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER.format(repo=str(REPO), cases=cases), encoding="utf-8")
    proc = torchrun(wrapper, 2, cwd=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    for name, _, _ in cases:
        assert f"[{name}] verify: " in proc.stderr, name
        for r in range(2):
            eager = torch.load(tmp_path / f"{name}_eager{r}.pt")
            got = torch.load(tmp_path / f"{name}_out{r}.pt")
            assert len(got) == len(eager)
            for k, (a, b) in enumerate(zip(got, eager, strict=True)):
                assert (a.shape, a.dtype) == (b.shape, b.dtype), f"{name} rank {r} output {k}"
                assert torch.equal(a, b), f"{name} rank {r} output {k} differs from the eager run"
