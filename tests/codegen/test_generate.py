"""Generating runner scripts: compiles, lints, deterministic, safe, and lowers as planned."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from commopt.buffers import plan_buffers, validate_plan
from commopt.codegen import build_model, generate_runner, write_runner
from commopt.errors import GraphError, OptionError
from commopt.ir.builder import GraphBuilder
from tests.codegen.conftest import TINY_REORDERED, script_table, tiny_graph, views_graph
from tests.codegen.hostile import EVIL, NAMES, hostile_graph

RUFF = Path(sys.executable).parent / "ruff"


def ruff_check(tmp_path: Path, source: str) -> str:
    """ruff's findings on ``source`` ('' when clean), with the repository's configuration."""
    path = tmp_path / "run_check.py"
    path.write_text(source, encoding="utf-8")
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([str(RUFF), "check", "--no-cache", "--config",
                           str(repo / "pyproject.toml"), str(path)],
                          capture_output=True, text=True)
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


def record(model, name: str) -> tuple:
    """The step record of the node called ``name``."""
    return next(r for r in model.steps if r[1] == name)


def test_generated_script_compiles_and_passes_ruff(tmp_path: Path) -> None:
    g = tiny_graph()
    source = generate_runner(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    compile(source, "run_tiny.py", "exec")
    assert ruff_check(tmp_path, source) == ""


def test_no_timestamps_and_same_source_twice() -> None:
    g = tiny_graph()
    plan = plan_buffers(g, TINY_REORDERED)
    source = generate_runner(g, TINY_REORDERED, plan)
    assert source == generate_runner(g, TINY_REORDERED, plan)
    assert not re.search(r"\b20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d", source)


def test_same_bytes_under_another_hash_seed() -> None:
    g = tiny_graph()
    here = generate_runner(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    code = ("import sys; from commopt.buffers import plan_buffers; "
            "from commopt.codegen import generate_runner; "
            "from tests.codegen.conftest import TINY_REORDERED, script_table, tiny_graph; g = tiny_graph(); "
            "sys.stdout.write(generate_runner(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED)))")
    repo = Path(__file__).resolve().parents[2]
    there = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}, check=True)
    assert there.stdout == here


def test_one_table_serves_both_orders_and_names_every_node() -> None:
    g = tiny_graph()
    model = build_model(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    source = generate_runner(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    # one record per node, in the graph's order, each on its own line starting with its name
    assert [r[:2] for r in model.steps] == [(n.index, n.name) for n in g.nodes]
    for r in model.steps:
        assert f"    [{r[0]}, {json.dumps(r[1])}, {json.dumps(r[2])}, " in source
    assert script_table(source) == json.loads(json.dumps(model.steps))
    # the optimized order is a list of those records' indices; the original is the table's own
    assert model.optimized_order == TINY_REORDERED
    assert script_table(source, "OPTIMIZED_ORDER") == [0, 1, 2, 3, 6, 4, 5, 7, 8, 9, 10, 11]
    # each record says what it reads: the script frees a value after its last reader
    assert record(model, "s")[3] == (g.index_of["emu"], g.index_of["z"])
    assert record(model, "ar_wait")[2:5] == ("wait", (g.index_of["ar"],), g.index_of["ar"])


def test_plan_zero_copy_and_copies_are_counted() -> None:
    g = tiny_graph()
    model = build_model(g, TINY_REORDERED, plan_buffers(g, TINY_REORDERED))
    # y (mm) feeds only collectives' inputs within their lifetimes: written in place
    into = record(model, "y")[7]
    assert into[0] == "out" and re.fullmatch(r"b_\d+_ag_input0", into[1]) and into[2] == "aten_mm_out"
    assert model.ops[into[2]] == "aten.mm.out" and model.ops[record(model, "y")[4]] == "aten.mm.default"
    # relu r is read only by the all_reduce, which runs in place on its output buffer; those
    # bytes are free from r to the issue, so r writes there too
    assert record(model, "r")[7][:2] == ("out", record(model, "ar")[8][0][2])
    assert re.fullmatch(r"b_\d+_ar_output0", record(model, "ar")[8][0][2])
    hows = [t[3] for r in model.steps if r[2] == "collective" for t in r[8]]
    assert hows == ["written", "written"]
    assert (model.zero_copy_per_iter, model.copies_per_iter) == (2, 0)
    assert len(model.arenas) == 1 and model.arenas[0][1] > 0


def test_producers_write_through_views_that_keep_their_bytes() -> None:
    g = views_graph()
    order = list(range(len(g)))
    plan = plan_buffers(g, order)
    model = build_model(g, order, plan)
    # mm writes its (4, 8) result into the reduce_scatter's (32,) input buffer; t, t and view
    # then run on the buffer, and the collective sends the buffer itself
    assert record(model, "mm")[7][0] == "out" and record(model, "mm")[7][3] == [4, 8]
    assert re.fullmatch(r"b_\d+_rs_input0", record(model, "mm")[7][1])
    # the all_reduce runs in place on its output buffer, which mm2 fills as (4, 8)
    assert record(model, "mm2")[7][1] == record(model, "ar")[8][0][2]
    assert record(model, "mm2")[7][3] == [4, 8]
    # a transpose left standing: the bytes are out of order, so they are copied in
    assert len(record(model, "mm3")) == 7
    hows = {r[1]: [t[3] for t in r[8]] for r in model.steps if r[2] == "collective"}
    assert hows == {"rs": ["written"], "ar": ["written"], "rs3": ["copy"]}
    assert (model.zero_copy_per_iter, model.copies_per_iter) == (2, 1)
    assert validate_plan(g, order, plan) == []


def test_without_plan_no_arenas() -> None:
    model = build_model(tiny_graph(), TINY_REORDERED, None)
    assert model.arenas == [] and model.buffers == [] and model.plan_digest == ""
    assert model.copies_per_iter == 1  # the all_reduce works on a fresh clone of its input
    tensors = [t for r in model.steps if r[2] == "collective" for t in r[8]]
    assert all(t[2] is None and t[3] is None and t[4] is None for t in tensors)
    assert not any(len(r) > 7 for r in model.steps if r[2] == "op")


def test_plan_for_another_order_is_refused() -> None:
    g = tiny_graph()
    plan = plan_buffers(g, g.original_order)
    with pytest.raises(OptionError, match="different order"):
        generate_runner(g, TINY_REORDERED, plan)


def test_order_that_breaks_a_dependency_is_refused() -> None:
    g = tiny_graph()
    bad = [0, 1, 3, 2, *range(4, len(g))]
    with pytest.raises(OptionError, match="before its predecessor"):
        generate_runner(g, bad)


def test_a_broken_order_names_its_first_node_run_too_early_and_that_nodes_first_late_input() -> None:
    """The check compares every edge at once; the error is still the one a walk of the order
    meets first: the earliest node with a predecessor after it, and its first such input."""
    g = tiny_graph()
    n = len(g)
    late = sorted(range(n), key=lambda i: (len(g.preds(i)) < 2, i))[0]  # two inputs, both late
    bad = [late, *(i for i in range(n) if i != late)]
    first_pred = g.nodes[g.preds(late)[0]].name
    with pytest.raises(OptionError, match=f"puts {g.nodes[late].name!r} before its predecessor "
                       f"{first_pred!r}"):
        generate_runner(g, bad)


def test_an_optimized_order_on_the_loaded_graph_says_which_graph_it_belongs_to() -> None:
    """Corpus SimpleFSDP (ws8): the default optimize re-gathers a layer's parameters in the
    order the backward uses them, a group order the loaded graph keeps. Paired with the loaded
    graph the order is refused, naming the group and the graph it belongs to; with the
    result's graph it builds."""
    import commopt
    from tests.corpus.graphs import CORPUS

    g = commopt.load_graph(CORPUS / "ws8" / "llama_fsdp.pt2")
    result = commopt.optimize(g, timings=False)
    order = list(result.order)
    with pytest.raises(OptionError, match=r"collectives of group '\w+', whose order this graph keeps.*"
                                          r"OptimizeResult\.graph"):
        build_model(g, order, None)
    assert build_model(result.graph, order, None).copies_per_iter >= 0


def test_group_without_ranks_smaller_than_world_is_a_user_error() -> None:
    b = GraphBuilder(name="g", world_size=4)
    b.group("1", size=2)
    x = b.input("x", (4,))
    c = b.collective("ar", "all_reduce", "1", x)
    b.output([b.wait("w", c)])
    with pytest.raises(GraphError, match="no ranks or mesh dimension"):
        generate_runner(b.build())


def test_mesh_groups_list_every_rank_set_of_their_dimension() -> None:
    b = GraphBuilder(name="mesh", world_size=4, mesh={"dp": 2, "tp": 2})
    b.group("1", ranks=[0, 2], mesh_dim="dp")
    b.group("3", ranks=[0, 1], mesh_dim="tp")
    x = b.input("x", (4,))
    c = b.collective("ar", "all_reduce", "3", x)
    d = b.collective("ar2", "all_reduce", "1", b.wait("w", c))
    b.output([b.wait("w2", d)])
    g = b.build()
    model = build_model(g, g.original_order)
    sets = {g.name: g.rank_sets for g in model.groups}
    assert sets == {"1": ((0, 2), (1, 3)), "3": ((0, 1), (2, 3))}
    assert [g.name for g in model.groups] == ["1", "3"]


def test_uneven_shards_give_each_rank_its_own_input_shape() -> None:
    from commopt.ir.graph import TensorMeta

    b = GraphBuilder(name="uneven", world_size=4, mesh={"dp": 4})
    b.group("0", ranks=[0, 1, 2, 3], mesh_dim="dp")
    x = b.input("x", (3, 2))
    b.nodes[x].outputs = (TensorMeta("float32", (3, 2), (3, 2), (10, 2), ("S(0)",)),)
    b.output([x])
    model = build_model(b.build(), [0, 1])
    assert model.inputs[0].shapes == ((3, 2), (3, 2), (3, 2), (1, 2))


def _names_in_code(source: str) -> set[str]:
    return {t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.NAME}


def _code_without_strings_and_comments(source: str) -> str:
    skip = (tokenize.STRING, tokenize.COMMENT)
    return " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                    if t.type not in skip)


def test_hostile_graph_compiles_lints_and_keeps_strings_inert(tmp_path: Path) -> None:
    g = hostile_graph()
    order = g.original_order
    source = generate_runner(g, order, plan_buffers(g, order))
    compile(source, "run_evil.py", "exec")
    assert ruff_check(tmp_path, source) == ""
    # outside string literals and comments only sanitized identifiers are left
    names = _names_in_code(source)
    assert not names & {"__import__", "system", "eval", "exec", "PWNED"}
    assert all(n.isidentifier() and n.isascii() for n in names)
    assert not _code_without_strings_and_comments(source).count("(os")
    # the names reach the script only as quoted data: repr() (GROUPS) or JSON (STEPS, INPUTS)
    names_in_table = {r[1] for r in script_table(source)}
    assert EVIL in names_in_table and NAMES[1] in names_in_table
    model = build_model(g, order, None)
    assert [e.duration_us for e in model.emulated] == [5.0]


def test_write_runner_is_atomic_and_executable(tmp_path: Path) -> None:
    target = tmp_path / "out" / "run_tiny.py"
    model = write_runner(tiny_graph(), target, TINY_REORDERED)
    assert target.stat().st_mode & 0o111
    assert model.graph_name == "tiny"
    assert [p.name for p in target.parent.iterdir()] == ["run_tiny.py"]


def test_view_without_a_call_reshapes_its_source_and_unknown_ops_are_emulated() -> None:
    b = GraphBuilder(name="labels", world_size=1)
    x = b.input("x", (4, 8))
    y = b.compute("y", "matmul", [x], (4, 8), duration_us=3.0, args=[])
    v = b.view("v", y, (32,), op="flatten", args=[])
    b.output([v])
    g = b.build()
    model = build_model(g, g.original_order)
    assert record(model, "v")[2:] == ("reshape", (1,), {"v": 1}, [32])
    assert record(model, "y")[2:] == ("emulated", (0,), 3.0, [("float32", [4, 8])], 0.25)
    assert [e.node for e in model.emulated] == [1]


def test_all_reduce_producer_copies_in_when_its_output_bytes_are_busy() -> None:
    from commopt.schemas.buffer_plan import BufferPlan

    g = tiny_graph()
    plan = plan_buffers(g, TINY_REORDERED)
    doc = plan.model_dump()
    bufs = {b["name"]: b for b in doc["groups"][0]["buffers"]}
    # put the all_gather's input (live from mm to its wait) on the all_reduce's output bytes
    bufs["ag:in0"]["offset_bytes"] = bufs["ar:out0"]["offset_bytes"]
    model = build_model(g, TINY_REORDERED, BufferPlan.model_validate(doc))
    src, _shape, buffer, how = record(model, "ar")[8][0][:4]
    assert (src, how) == (g.index_of["r"], "copy") and re.fullmatch(r"b_\d+_ar_output0", buffer)
    assert len(record(model, "r")) == 7  # r no longer writes into the buffer itself
    assert model.copies_per_iter == 1


def test_infinite_emulated_duration_is_refused() -> None:
    b = GraphBuilder(name="inf", world_size=1)
    x = b.input("x", (2,))
    y = b.compute("y", "kernel", [x], (2,), duration_us=float("inf"), args=[])
    b.output([y])
    with pytest.raises(GraphError, match="finite"):
        generate_runner(b.build())


def test_keyword_names_that_are_not_plain_identifiers_are_passed_as_a_dict(tmp_path: Path) -> None:
    b = GraphBuilder(name="kw", world_size=1)
    x = b.input("x", (2,))
    b.compute("y", "aten.relu.default", [x], (2,),
              kwargs={"from": 1, "a b": EVIL, "ok": "text"})
    b.output([x])
    source = generate_runner(b.build())
    assert ruff_check(tmp_path, source) == ""
    line = next(ln for ln in source.splitlines() if '"aten_relu_default", ' in ln)
    record = json.loads(line.strip().rstrip(","))
    assert record == [1, "y", "op", [0], "aten_relu_default", [{"v": 0}],
                      {"from": 1, "a b": EVIL, "ok": "text"}]


def test_a_slot_shared_by_collectives_sending_different_tensors_is_refused() -> None:
    """A plan file whose shared slot serves collectives sending different tensors would make
    the runner read the wrong values: generation refuses it (verify-plan says why)."""
    from commopt.errors import OptionError
    from tests.codegen.conftest import regather_graph

    g = regather_graph()
    for option in (None, "all"):
        plan = plan_buffers(g, persistent_params=option)
        generate_runner(g, g.original_order, plan)
        bad = plan.model_copy(deep=True)
        slot = next(b for a in bad.groups for b in a.buffers if b.name == "rs1:in0")
        slot.shared_with = ["ag2:in0"]
        with pytest.raises(OptionError, match="sending different tensors"):
            generate_runner(g, g.original_order, bad)
