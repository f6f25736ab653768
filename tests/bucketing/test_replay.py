"""The replayed bucketed program (commopt.bucketing.replay) has exactly the makespan the
simulator gives the rewritten graph: the bucket choice ranks candidates by it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from commopt.bucketing.eligibility import bucket_problem
from commopt.bucketing.replay import Program
from commopt.bucketing.rewrite import Bucket, _Names
from commopt.bucketing.select import _trial, candidate_classes, choose_buckets, grow_buckets
from commopt.estimators import resolve
from commopt.estimators.options import EstimatorOptions
from commopt.invariants import check_order
from commopt.io import load_graph
from commopt.ir.schedule import Schedule
from tests.bucketing.helpers import raised_order
from tests.corpus.graphs import CORPUS
from tests.strategies import graph_and_durations


def _tags(graph):
    names, tags = _Names(graph), []

    def tag(k: int) -> str:
        while len(tags) <= k:
            tags.append(names.prefix())
        return tags[k]

    return tag


def _every_candidate_matches(graph, durations, estimate) -> int:
    """Grow each class's runs as the bucket choice does, keeping two of every three merges,
    and compare each replayed makespan with the rewritten graph's simulated makespan (a replay
    cut short: the rewritten program is not shorter than the kept one); returns how many."""
    order = Schedule.of(graph, raised_order(graph))
    program = Program(graph, order, durations, estimate, _tags(graph))
    tried = 0

    def accepts(kept: list[Bucket], cand: list[int]) -> bool:
        nonlocal tried
        if bucket_problem(graph, order, cand) is not None:
            return False
        replayed = program.try_bucket(Bucket(tuple(cand)), len(kept) if len(cand) > 2 else None)
        rewritten = _trial(graph, order, [*kept, Bucket(tuple(cand))], durations, estimate,
                           lambda g, o: True).makespan_us
        tried += 1
        if replayed is None:  # cut short: it cannot be shorter than the kept program
            assert rewritten >= program.makespan_us, cand
        else:
            assert replayed == rewritten, cand
        if tried % 3 and replayed is not None:
            program.accept()
            return True
        return False

    kept = grow_buckets(candidate_classes(graph, order), accepts)
    assert [a.bucket for a in program.added] == kept
    return tried


@pytest.mark.parametrize("name", ["llama_fsdp", "llama_tp_fsdp_2d"])
@pytest.mark.parametrize("gpus_per_node", [8, 1])
def test_replayed_makespan_is_the_rewritten_programs_on_corpus_graphs(name: str, gpus_per_node: int) -> None:
    graph = load_graph(CORPUS / "ws8" / f"{name}.pt2")
    chain = resolve(options=EstimatorOptions(estimator="analytical", hardware="h100",
                                             gpus_per_node=gpus_per_node))
    tried = _every_candidate_matches(graph, chain.durations(graph), lambda n, g: chain.estimate(n, g)[0])
    assert tried >= 30  # the comparison is not vacuous


def _estimate(node, graph) -> float:
    return 0.0 if node.kind.label in ("view", "wait") else 3.0


@settings(max_examples=40, deadline=None)
@given(graph_and_durations())
def test_replayed_makespan_is_the_rewritten_programs_on_random_graphs(gd) -> None:
    graph, durations = gd
    _every_candidate_matches(graph, durations, _estimate)


def test_choice_is_proven_and_deterministic() -> None:
    graph = load_graph(CORPUS / "ws8" / "llama_fsdp.pt2")
    chain = resolve(options=EstimatorOptions(estimator="analytical", hardware="h100", gpus_per_node=1))
    durations = chain.durations(graph)
    order = raised_order(graph)
    from commopt.sim.engine import makespan_us

    baseline = makespan_us(graph, order, durations)
    choices = [choose_buckets(graph, order, durations, lambda n, g: chain.estimate(n, g)[0],
                              lambda g, o: True, baseline) for _ in range(2)]
    first, second = choices
    assert first.best is not None and first.differed == 0
    assert first.best.rewritten.buckets == second.best.rewritten.buckets
    new = first.best.rewritten.graph
    assert check_order(new, new.original_order) == []
    assert first.best.makespan_us == makespan_us(new, new.original_order, first.best.durations_us) < baseline
