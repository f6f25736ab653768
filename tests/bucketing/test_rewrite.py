"""The bucket rewrite on real-model graphs: structure, invariants and file round trips."""

from __future__ import annotations

import pytest

from commopt.bucketing import apply_buckets
from commopt.bucketing.eligibility import bucket_problem, member_problem
from commopt.invariants import check_order
from commopt.io import load_graph
from commopt.io.json_graph import load_json_graph, save_json_graph
from commopt.io.pt2 import save_pt2
from commopt.ir.graph import NodeKind
from commopt.ir.schedule import Schedule
from tests.bucketing.helpers import largest_buckets, raised_order
from tests.corpus.graphs import CORPUS


@pytest.fixture(scope="module")
def fsdp():
    g = load_graph(CORPUS / "ws2" / "llama_fsdp.pt2")
    order = raised_order(g)
    return g, order, largest_buckets(g, order)


def test_every_simple_fsdp_collective_is_bucketable_and_merges(fsdp) -> None:
    g, order, buckets = fsdp
    assert all(member_problem(g, c) is None for c in g.collectives())
    rw = apply_buckets(g, order, buckets)
    new = rw.graph
    assert len(new.collectives()) == len(g.collectives()) - sum(len(b.members) - 1 for b in buckets)
    assert len(buckets) == 2  # one all_gather and one reduce_scatter bucket of 21 members each
    assert check_order(new, new.original_order) == []


def test_bucket_carries_its_members_bytes_and_results_keep_their_shapes(fsdp) -> None:
    g, order, buckets = fsdp
    rw = apply_buckets(g, order, buckets)
    new = rw.graph
    for b, (members, name) in zip(buckets, rw.buckets, strict=True):
        coll = new.node(name)
        assert coll.collective.in_bytes == sum(g.nodes[g.nodes[c].inputs[0]].nbytes for c in b.members)
        assert members == tuple(g.nodes[c].name for c in b.members)
    out_old = g.nodes[-1]
    out_new = new.nodes[-1]
    assert out_new.kind is NodeKind.OUTPUT
    shapes_old = [g.nodes[i].outputs[0].shape for i in out_old.inputs]
    shapes_new = [new.nodes[i].outputs[0].shape for i in out_new.inputs]
    assert shapes_new == shapes_old  # gradients come back in the members' shapes


def test_member_waited_before_the_last_member_is_issued_cannot_join() -> None:
    g = load_graph(CORPUS / "ws2" / "llama_fsdp.pt2")
    sched = Schedule.original(g)  # exported order: each all_gather waited right after it
    first, second = g.collectives()[:2]
    assert "waited on before" in bucket_problem(g, sched, [first, second])


def test_rewritten_graph_round_trips_through_json_and_pt2(fsdp, tmp_path) -> None:
    g, order, buckets = fsdp
    new = apply_buckets(g, order, buckets).graph
    save_json_graph(new, tmp_path / "b.json")
    back = load_json_graph(tmp_path / "b.json")
    assert [n.name for n in back.nodes] == [n.name for n in new.nodes]
    assert back.meta["buckets"] == new.meta["buckets"]
    save_pt2(new, tmp_path / "b.pt2", new.original_order)
    again = load_graph(tmp_path / "b.pt2")
    assert sorted(n.name for n in again.nodes) == sorted(n.name for n in new.nodes)
    assert len(again.collectives()) == len(new.collectives())


def test_bucketed_graph_of_a_json_source_is_written_and_reloads(fsdp, tmp_path) -> None:
    g, order, buckets = fsdp
    save_json_graph(g, tmp_path / "src.json")
    src = load_json_graph(tmp_path / "src.json")
    new = apply_buckets(src, order, buckets).graph
    save_json_graph(new, tmp_path / "b.json")
    assert len(load_json_graph(tmp_path / "b.json").collectives()) == len(new.collectives())
