"""Generated runners started with torchrun on gloo: verify, outputs, digests, hostile names.

Each test starts 2 ranks (slow: a few seconds of process start-up each).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from commopt.buffers import plan_buffers
from commopt.codegen import write_runner
from tests.codegen.conftest import TINY_REORDERED, tiny_graph, torchrun
from tests.codegen.hostile import NAMES, PWNED, hostile_graph

pytestmark = pytest.mark.slow


def _reference_tiny(inputs: list[dict[str, torch.Tensor]]) -> list[list[torch.Tensor]]:
    """tiny_graph's outputs computed by hand from both ranks' inputs.

    The emulated node consumes the all_reduce and yields a constant; the all_reduce result
    itself is checked by the hostile-graph test.
    """
    ys = [i["x"] @ i["w"] for i in inputs]
    gathered = torch.cat(ys)
    fill = ((9 % 7) + 1) / 8.0  # the emulated node 'emu' (index 9) yields this constant
    return [[torch.full((4, 8), fill) + torch.relu(i["x"]), gathered] for i in inputs]


def test_tiny_runner_verifies_and_matches_a_hand_computed_reference(tmp_path: Path) -> None:
    g = tiny_graph()
    script = tmp_path / "run_tiny.py"
    write_runner(g, script, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    gen = torch.Generator().manual_seed(3)
    inputs = [{"x": torch.randn(4, 8, generator=gen), "w": torch.randn(8, 8, generator=gen)}
              for _ in range(2)]
    for r, values in enumerate(inputs):
        torch.save(values, tmp_path / f"in{r}.pt")
    proc = torchrun(script, 2, "--verify", "--iters", "3", "--warmup", "1",
                    "--inputs", "in{rank}.pt", "--dump-outputs", "out{rank}.pt",
                    "--out", "results.json", "--profile", "prof", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "verify: 2 output(s) identical" in proc.stderr
    for r in range(2):
        trace = json.loads((tmp_path / "prof" / f"trace_rank{r}.json").read_text())
        assert any("aten::mm" in str(e.get("name")) for e in trace["traceEvents"])
    assert "1 copies remain per iteration, 1 producers write in place" in proc.stderr
    want = _reference_tiny(inputs)
    for r in range(2):
        got = torch.load(tmp_path / f"out{r}.pt")
        assert len(got) == 2
        torch.testing.assert_close(got[0], want[r][0])
        torch.testing.assert_close(got[1], want[r][1])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["backend"] == "gloo" and results["buffer_mode"] == "plain"
    assert len(results["ranks"]) == 2 and len(results["ranks"][0]["times_us"]) == 3
    assert results["median_us"] > 0


def test_ranks_with_different_plans_stop_with_the_digest_error(tmp_path: Path) -> None:
    g = tiny_graph()
    write_runner(g, tmp_path / "run_a.py", TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    write_runner(g, tmp_path / "run_b.py", TINY_REORDERED,
                 plan_buffers(g, TINY_REORDERED, align=4096))
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import os, runpy\n"
        "script = ['run_a.py', 'run_b.py'][int(os.environ['RANK'])]\n"
        "runpy.run_path(script, run_name='__main__')\n", encoding="utf-8")
    proc = torchrun(launcher, 2, cwd=tmp_path)
    assert proc.returncode != 0
    assert "buffer plan digest differs across ranks" in proc.stderr
    assert "rank 0:" in proc.stderr and "rank 1:" in proc.stderr


def test_hostile_graph_runs_the_same_computation_and_executes_nothing(tmp_path: Path) -> None:
    g = hostile_graph()
    script = tmp_path / "run_evil.py"
    write_runner(g, script, g.original_order, plan_buffers(g, g.original_order))
    gen = torch.Generator().manual_seed(5)
    inputs = [{NAMES[0]: torch.randn(4, 8, generator=gen), NAMES[1]: torch.randn(8, 8, generator=gen)}
              for _ in range(2)]
    for r, values in enumerate(inputs):
        torch.save(values, tmp_path / f"in{r}.pt")
    proc = torchrun(script, 2, "--verify", "--iters", "1", "--warmup", "0",
                    "--inputs", "in{rank}.pt", "--dump-outputs", "out{rank}.pt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not (tmp_path / PWNED).exists()
    assert "verify: 2 output(s) identical" in proc.stderr
    ys = [i[NAMES[0]] @ i[NAMES[1]] for i in inputs]
    reduced = sum(torch.relu(y) for y in ys)
    fill = ((6 % 7) + 1) / 8.0  # the emulated node (index 6) yields this constant
    for r in range(2):
        got = torch.load(tmp_path / f"out{r}.pt")
        torch.testing.assert_close(got[0], torch.div(torch.full((4, 8), fill), ys[r],
                                                     rounding_mode="trunc"))
        torch.testing.assert_close(got[1], reduced)


def test_duration_only_json_graph_emulates_and_reduces(tmp_path: Path) -> None:
    from tests.codegen.test_golden import duration_only_graph

    g = duration_only_graph()
    script = tmp_path / "run_durations.py"
    write_runner(g, script, g.original_order, plan_buffers(g, g.original_order))
    proc = torchrun(script, 2, "--verify", "--iters", "3", "--warmup", "1",
                    "--dump-outputs", "out{rank}.pt", "--out", "results.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "2 node(s) emulated by a timed busy wait" in proc.stderr
    for r in range(2):
        scattered, other = torch.load(tmp_path / f"out{r}.pt")
        # 'bwd' (index 1) fills 0.25 on both ranks; the avg reduce_scatter keeps 0.25
        assert scattered.dtype == torch.bfloat16 and scattered.shape == (4, 4)
        assert torch.equal(scattered, torch.full((4, 4), 0.25, dtype=torch.bfloat16))
        assert torch.equal(other, torch.full((8, 4), 0.5, dtype=torch.bfloat16))
    results = json.loads((tmp_path / "results.json").read_text())
    # a step busy-waits at least the two emulated durations (40 + 25 us)
    assert min(min(r["times_us"]) for r in results["ranks"]) >= 65.0
