"""Verify a bucketed graph against the program it was made from.

A graph the bucket pass wrote records its buckets (``meta["buckets"]``: member collective
names, merged collective name). The check replays them: each member's collective is put where
the merged collective is, each member's wait where its result node is. That order of the
original program must keep every invariant of the original (so nothing wrote a member's
input before the merged collective read it, and every use follows its member's result), and
rewriting the original with the recorded buckets in that order must give exactly the nodes
the file holds (:func:`commopt.invariants.same_nodes_reordered` against the rewrite: same nodes,
same ops and arguments, and the file's order valid for them). A bucket the original cannot
form is a violation naming it.
"""

from __future__ import annotations

from commopt.bucketing.eligibility import class_key, member_problem, written_roots
from commopt.bucketing.rewrite import Bucket, apply_buckets, result_name, tag_of
from commopt.ir.graph import Graph


def verify_graph(original: Graph, reordered, *, content: Graph | None = None,
                 allow_cross_group_reorder: bool | None = None):
    """Violations of a reordered graph with respect to its original: a bucketed graph (one
    that records buckets) by :func:`verify_bucketed`, any other by
    :func:`commopt.invariants.verify_reordered`."""
    from commopt.invariants import verify_reordered

    if isinstance(reordered, Graph) and reordered.meta.get("buckets"):
        return verify_bucketed(original, reordered, allow_cross_group_reorder=allow_cross_group_reorder)
    return verify_reordered(original, reordered, content=content,
                            allow_cross_group_reorder=allow_cross_group_reorder)


def expanded_order(original: Graph, bucketed: Graph, order=None) -> list[int]:
    """The order of ``original``'s nodes that ``bucketed`` (in ``order``, default its own)
    stands for: each bucket's member collectives where the merged collective is, each member's
    wait where its result is. Raises ValueError for a bucket the original cannot form."""
    buckets, where, problems = _recorded(original, bucketed.meta.get("buckets", []))
    if problems:
        raise ValueError(problems[0])
    return _expand(original, bucketed, where, order)


def _expand(original: Graph, bucketed: Graph, where: dict[str, list[int]], order=None) -> list[int]:
    out: list[int] = []
    for i in (range(len(bucketed)) if order is None else order):
        name = bucketed.nodes[i].name
        if name in where:
            out.extend(where[name])
        elif name in original.index_of:
            out.append(original.index_of[name])
    return out


def verify_bucketed(original: Graph, reordered: Graph, *, allow_cross_group_reorder: bool | None):
    """Violations of ``reordered`` (a bucketed graph) with respect to ``original``, as
    :func:`commopt.invariants.verify_reordered` gives them (module docstring)."""
    from commopt.invariants import Violation, check_order, same_nodes_reordered

    buckets, where, problems = _recorded(original, reordered.meta.get("buckets", []))
    if problems:
        return [Violation(0, p, ()) for p in problems]
    order = _expand(original, reordered, where)
    if sorted(order) != list(range(len(original))):
        missing = next(n.name for n in original.nodes if n.index not in set(order))
        return [Violation(0, f"{missing!r} of the original graph is neither in the bucketed graph "
                             "nor a member of a recorded bucket", (missing,))]
    if allow_cross_group_reorder is None:
        from commopt.cross_group import decide_cross_group

        allow_cross_group_reorder = decide_cross_group(original, None).allowed
    broken = check_order(original, order, allow_cross_group_reorder=allow_cross_group_reorder)
    if broken:
        return broken
    expected = apply_buckets(original, order, buckets).graph
    return same_nodes_reordered(expected, reordered, allow_cross_group_reorder=True)


def _recorded(original: Graph, records) -> tuple[list[Bucket], dict[str, list[int]], list[str]]:
    """The recorded buckets as :class:`Bucket` of ``original``, the original nodes each
    added node stands for (merged collective -> member collectives, member result -> member
    wait), and the problems found."""
    buckets, where, problems = [], {}, []
    written = written_roots(original)
    for members, collective in records:
        idx = [original.index_of.get(m) for m in members]
        if None in idx or len(idx) < 2:
            problems.append(f"bucket {collective!r} names collectives that are not in the original graph")
            continue
        why = next((w for w in (member_problem(original, c, written) for c in idx) if w), None)
        if why is None and len({class_key(original, c) for c in idx}) > 1:
            why = "its members differ in group, type, reduce op, dtype or arguments"
        if why is not None:
            problems.append(f"bucket {collective!r} cannot be formed from the original: {why}")
            continue
        tag = tag_of(collective, original.nodes[idx[0]].collective.type)
        buckets.append(Bucket(tuple(idx), tag))
        where[collective] = idx
        for k, c in enumerate(idx):
            where[result_name(tag, k)] = list(original.waits_of(c))
    return buckets, where, problems
