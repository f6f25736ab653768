"""Generated runners started with torchrun on gloo: verify, outputs, digests, hostile names.

Process start-up dominates on 2 cores, so the runners of four small graphs share one 2-rank
launch (a wrapper initializes the world and calls each runner's ``main(argv)``); each test
then checks its own runner's files and log lines. The mismatched-plan test needs its own
launch, and there each rank starts its runner as a script (``__main__``), as torchrun would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import commopt
from commopt.buffers import plan_buffers
from commopt.codegen import write_runner
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, Ref
from commopt.synth import fsdp_tp_stack
from tests.codegen.conftest import (
    REPO,
    TINY_REORDERED,
    regather_graph,
    tiny_graph,
    torchrun,
    views_graph,
)
from tests.codegen.hostile import NAMES, PWNED, hostile_graph
from tests.codegen.test_golden import duration_only_graph

pytestmark = pytest.mark.slow

WRAPPER = '''\
import json
import os
import runpy
import sys

import torch.distributed as dist

sys.path.insert(0, {repo!r})
from tests.distributed import use_gloo_worker_threads

rank = int(os.environ["RANK"])
use_gloo_worker_threads()  # as run_gloo: one worker thread per gloo group
dist.init_process_group("gloo")
codes = {{}}
for name, argv in {runs!r}:
    main = runpy.run_path(f"run_{{name}}.py", run_name="runner")["main"]
    codes[name] = main(argv)
dist.destroy_process_group()
with open(f"codes{{rank}}.json", "w") as fh:
    json.dump(codes, fh)
'''


def collective_kinds_graph() -> Graph:
    """broadcast from group rank 1, all_to_all with splits, a coalesced all_gather, barrier."""
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


def _inputs(seed: int, shapes: dict[str, tuple[int, ...]]) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [{k: torch.randn(s, generator=gen) for k, s in shapes.items()} for _ in range(2)]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory):
    """Run the tiny, hostile, durations and kinds runners in one 2-rank launch."""
    tmp = tmp_path_factory.mktemp("runners")
    tiny, evil, durations, kinds = tiny_graph(), hostile_graph(), duration_only_graph(), \
        collective_kinds_graph()
    write_runner(tiny, tmp / "run_tiny.py", TINY_REORDERED, plan_buffers(tiny, TINY_REORDERED))
    for name, g in (("evil", evil), ("durations", durations), ("kinds", kinds), ("views", views_graph())):
        write_runner(g, tmp / f"run_{name}.py", g.original_order,
                     plan_buffers(g, g.original_order))
    synth = fsdp_tp_stack(3, dp=2, hidden=16, tokens=8, dtype="float32")
    synth_order = list(commopt.optimize(synth).order)
    assert synth_order != synth.original_order  # the passes moved collectives
    write_runner(synth, tmp / "run_synth.py", synth_order, plan_buffers(synth, synth_order))
    regather = regather_graph()
    write_runner(regather, tmp / "run_regather.py", regather.original_order,
                 plan_buffers(regather, persistent_params="all"))
    inputs = {
        "tiny": _inputs(3, {"x": (4, 8), "w": (8, 8)}),
        "evil": _inputs(5, {NAMES[0]: (4, 8), NAMES[1]: (8, 8)}),
        "kinds": [{"x": torch.arange(4.0) + 10 * r,
                   "y": torch.arange(6.0).reshape(2, 3) - 10 * r} for r in range(2)],
        "regather": _inputs(7, {"x": (8, 8), "w": (4, 8)}),
        "views": _inputs(11, {"x": (4, 8), "w": (8, 8)}),
    }
    for name, per_rank in inputs.items():
        for r, values in enumerate(per_rank):
            torch.save(values, tmp / f"{name}_in{r}.pt")
    common = ["--verify", "--dump-outputs"]
    runs = [
        ("tiny", [*common, "tiny_out{rank}.pt", "--inputs", "tiny_in{rank}.pt", "--iters", "3",
                  "--warmup", "1", "--out", "tiny.json", "--profile", "prof"]),
        ("evil", [*common, "evil_out{rank}.pt", "--inputs", "evil_in{rank}.pt", "--iters", "1"]),
        ("durations", [*common, "durations_out{rank}.pt", "--iters", "3", "--out",
                       "durations.json"]),
        ("kinds", [*common, "kinds_out{rank}.pt", "--inputs", "kinds_in{rank}.pt", "--iters", "1"]),
        ("views", [*common, "views_out{rank}.pt", "--inputs", "views_in{rank}.pt", "--iters", "1",
                   "--memory"]),
        ("regather", [*common, "regather_out{rank}.pt", "--inputs", "regather_in{rank}.pt",
                      "--iters", "2", "--memory", "--out", "regather.json"]),
        ("synth", [*common, "synth_out{rank}.pt", "--iters", "1"]),
    ]
    (tmp / "wrapper.py").write_text(WRAPPER.format(repo=str(REPO), runs=runs), encoding="utf-8")
    proc = torchrun(tmp / "wrapper.py", 2, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-6000:]
    codes = [json.loads((tmp / f"codes{r}.json").read_text()) for r in range(2)]
    return tmp, proc.stderr, codes, inputs


def _outputs(tmp: Path, name: str) -> list[list]:
    return [torch.load(tmp / f"{name}_out{r}.pt") for r in range(2)]


def test_tiny_runner_verifies_and_matches_a_hand_computed_reference(launched) -> None:
    tmp, log, codes, inputs = launched
    assert [c["tiny"] for c in codes] == [0, 0]
    assert "[tiny] verify: 2 output(s) identical" in log
    assert "[tiny] buffers: 3 in 1 arena(s), 2048 bytes, mode plain; 0 copies remain per " \
           "iteration, 2 producers write in place" in log
    ys = [i["x"] @ i["w"] for i in inputs["tiny"]]
    fill = ((9 % 7) + 1) / 8.0  # the emulated node 'emu' (index 9) yields this constant
    for r, (s, gathered) in enumerate(_outputs(tmp, "tiny")):
        # the emulated node consumes the all_reduce; the hostile test checks an all_reduce
        torch.testing.assert_close(s, torch.full((4, 8), fill) + torch.relu(inputs["tiny"][r]["x"]))
        torch.testing.assert_close(gathered, torch.cat(ys))
    results = json.loads((tmp / "tiny.json").read_text())
    assert results["backend"] == "gloo" and results["buffer_mode"] == "plain"
    assert len(results["ranks"]) == 2 and len(results["ranks"][0]["times_us"]) == 3
    assert results["median_us"] > 0
    for r in range(2):
        trace = json.loads((tmp / "prof" / f"trace_rank{r}.json").read_text())
        assert any("aten::mm" in str(e.get("name")) for e in trace["traceEvents"])


def test_producers_writing_through_views_compute_the_reference(launched) -> None:
    """mm writes into the collectives' buffers in its own shape and the views run on them
    (tests/codegen/test_generate.py has the records): the values are the eager ones."""
    tmp, log, codes, inputs = launched
    assert [c["views"] for c in codes] == [0, 0]
    assert "[views] verify: 3 output(s) identical" in log
    assert "1 copies remain per iteration, 2 producers write in place" in log
    assert "[views] memory rank 0: peak" in log
    mms = [i["x"] @ i["w"] for i in inputs["views"]]
    total = mms[0] + mms[1]
    for r, (rs, ar, rs3) in enumerate(_outputs(tmp, "views")):
        torch.testing.assert_close(rs, total.reshape(32)[16 * r:16 * (r + 1)])
        torch.testing.assert_close(ar, total.reshape(2, 16))
        torch.testing.assert_close(rs3, total.t()[4 * r:4 * (r + 1)])


def test_hostile_graph_runs_the_same_computation_and_executes_nothing(launched) -> None:
    tmp, log, codes, inputs = launched
    assert [c["evil"] for c in codes] == [0, 0]
    assert not (tmp / PWNED).exists()
    ys = [i[NAMES[0]] @ i[NAMES[1]] for i in inputs["evil"]]
    reduced = sum(torch.relu(y) for y in ys)
    fill = ((6 % 7) + 1) / 8.0  # the emulated node (index 6) yields this constant
    for r, (divided, all_reduced) in enumerate(_outputs(tmp, "evil")):
        torch.testing.assert_close(divided, torch.div(torch.full((4, 8), fill), ys[r],
                                                      rounding_mode="trunc"))
        torch.testing.assert_close(all_reduced, reduced)


def test_duration_only_json_graph_emulates_and_reduces(launched) -> None:
    tmp, log, codes, _ = launched
    assert [c["durations"] for c in codes] == [0, 0]
    assert "[durations] 2 node(s) emulated by a timed busy wait" in log
    assert "[durations] verify: 2 output(s) identical" in log
    for scattered, other in _outputs(tmp, "durations"):
        # 'bwd' (index 1) fills 0.25 on both ranks; the avg reduce_scatter keeps 0.25
        assert scattered.dtype == torch.bfloat16 and scattered.shape == (4, 4)
        assert torch.equal(scattered, torch.full((4, 4), 0.25, dtype=torch.bfloat16))
        assert torch.equal(other, torch.full((8, 4), 0.5, dtype=torch.bfloat16))
    results = json.loads((tmp / "durations.json").read_text())
    # a step busy-waits at least the two emulated durations (40 + 25 us)
    assert min(min(r["times_us"]) for r in results["ranks"]) >= 65.0


def test_broadcast_all_to_all_coalesced_all_gather_and_barrier(launched) -> None:
    tmp, log, codes, inputs = launched
    assert [c["kinds"] for c in codes] == [0, 0]
    xs = [i["x"] for i in inputs["kinds"]]
    ys = [i["y"] for i in inputs["kinds"]]
    for r, (bc, a2a, gathered_x, gathered_y) in enumerate(_outputs(tmp, "kinds")):
        assert torch.equal(bc, xs[1])
        assert torch.equal(a2a, torch.cat([xs[0][2 * r:2 * r + 2], xs[1][2 * r:2 * r + 2]]))
        assert torch.equal(gathered_x, torch.cat(xs))
        assert torch.equal(gathered_y, torch.cat(ys))


def test_persistent_parameter_and_shared_slots_compute_the_reference(launched) -> None:
    """The parameter w lives in the arena (placed once, both gathers read it), r's two
    collectives read one slot: outputs equal a hand-computed reference, and what each rank
    holds is the predicted footprint."""
    tmp, log, codes, inputs = launched
    assert [c["regather"] for c in codes] == [0, 0]
    assert "[regather] 1 parameter(s) placed in the arena once" in log
    assert "[regather] verify: 3 output(s) identical" in log
    per_rank = inputs["regather"]
    gathered_w = torch.cat([i["w"].reshape(32) for i in per_rank]).reshape(8, 8)
    ys = [torch.relu(i["x"]) @ gathered_w for i in per_rank]
    rs = [torch.relu(y) for y in ys]
    for r, (z, scattered, gathered) in enumerate(_outputs(tmp, "regather")):
        torch.testing.assert_close(z, ys[r] @ gathered_w)
        torch.testing.assert_close(scattered, (rs[0] + rs[1])[4 * r:4 * r + 4])
        torch.testing.assert_close(gathered, torch.cat(rs))
    results = json.loads((tmp / "regather.json").read_text())
    assert results["copies_per_iter"] == 0 and results["persistent_params"] == 1
    for m in results["memory"]:
        assert 0.95 <= m["peak_bytes"] / results["predicted_peak_bytes"] <= 1.05


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
    # started as a script, the runner itself gives each gloo group one worker thread
    assert "backend gloo, device cpu, 1 worker thread(s) per group" in proc.stderr


def test_the_synthetic_scale_graph_runs_for_real(launched) -> None:
    """The graphs the scale benchmark times (commopt.synth) are runnable programs: every
    call matches its op's schema, and the reordered step gives the original's outputs."""
    tmp, log, codes, _ = launched
    assert [c["synth"] for c in codes] == [0, 0]
    assert "[synth_fsdp2_tp1_L3] verify:" in log and "identical to the original order" in log
