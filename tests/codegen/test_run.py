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
    assert "0 copies remain per iteration, 2 producers write in place" in proc.stderr
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


def _collective_kinds_graph():
    """broadcast from group rank 1, all_to_all with splits, a coalesced all_gather, barrier."""
    from commopt.ir.builder import GraphBuilder
    from commopt.ir.graph import Ref

    b = GraphBuilder(name="kinds", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4,))
    y = b.input("y", (2, 3))
    bc = b.collective("bc", "broadcast", "0", x)
    b.nodes[bc].args = (Ref(x), 1, "0")
    a2a = b.collective("a2a", "all_to_all", "0", x)
    b.nodes[a2a].args = (Ref(x), [2, 2], [2, 2], "0")
    ag = b.collective("ag", "all_gather", "0", [x, y])
    bar = b.collective("bar", "barrier", "0", x)
    bc_w, a2a_w, ag_w = b.wait("bc_w", bc), b.wait("a2a_w", a2a), b.wait("ag_w", ag)
    b.wait("bar_w", bar)
    g0 = b.compute("g0", "getitem", [ag_w], (8,), args=[Ref(ag_w), 0])
    g1 = b.compute("g1", "getitem", [ag_w], (4, 3), args=[Ref(ag_w), 1])
    b.output([bc_w, a2a_w, g0, g1])
    return b.build()


def test_broadcast_all_to_all_coalesced_all_gather_and_barrier(tmp_path: Path) -> None:
    g = _collective_kinds_graph()
    script = tmp_path / "run_kinds.py"
    write_runner(g, script, g.original_order, plan_buffers(g, g.original_order))
    xs = [torch.arange(4.0) + 10 * r for r in range(2)]
    ys = [torch.arange(6.0).reshape(2, 3) - 10 * r for r in range(2)]
    for r in range(2):
        torch.save({"x": xs[r], "y": ys[r]}, tmp_path / f"in{r}.pt")
    proc = torchrun(script, 2, "--verify", "--iters", "1", "--warmup", "0",
                    "--inputs", "in{rank}.pt", "--dump-outputs", "out{rank}.pt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for r in range(2):
        bc, a2a, gathered_x, gathered_y = torch.load(tmp_path / f"out{r}.pt")
        assert torch.equal(bc, xs[1])
        assert torch.equal(a2a, torch.cat([xs[0][2 * r:2 * r + 2], xs[1][2 * r:2 * r + 2]]))
        assert torch.equal(gathered_x, torch.cat(xs))
        assert torch.equal(gathered_y, torch.cat(ys))
