"""The cross-group rule: when collectives of different process groups, and of one group, may
change their relative order.

Collectives of *different* groups may be reordered when every rank that runs the program issues them in one common order:
then, for every group, all its members reach its collectives in the same sequence, whatever
the runtime does with several groups (separate communicators and streams, or one stream
serializing them all), so no rank waits on a peer that is blocked on another group. commopt
computes one deterministic order and every rank runs it; that is enough when every rank runs
this same program. It is not proven, and the order across groups is kept, when

- a group is neither the whole world nor one slice of a recorded mesh dimension: the ranks
  outside it run another program, whose order across groups commopt never sees;
- the graph sends or receives point to point: pipeline stages run different programs;
- the world size is unknown: nothing says which ranks run the program;
- the durations are measured on this machine (the ``benchmark`` estimator): ranks that run
  commopt each on its own could get different orders.

The same proof frees the order of one group's collectives (its members match them by issue
order, and every rank issues them in the one new order): :func:`within_groups`, the default
where proven; without it invariant 2 keeps each group's order.

See docs/process-groups.md ("Reordering collectives of different groups", "... of one group").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from commopt.ir.graph import Graph

#: Collective types that only exist between ranks running different programs (pipelines).
POINT_TO_POINT = frozenset({"send", "recv"})

#: Estimators whose durations change between runs and machines.
MEASURED_ESTIMATORS = ("benchmark",)


@dataclass(frozen=True, slots=True)
class CrossGroupRule:
    """Whether collectives of different groups may change their relative order, which rule
    decided it (``one-group``, ``spmd``, ``not-proven``, ``flag``) and why, in one sentence."""

    allowed: bool
    rule: str
    reason: str


def decide_cross_group(graph: Graph, requested: bool | None, *,
                       estimator: str | None = None) -> CrossGroupRule:
    """The rule for ``graph``: ``requested`` True/False is the user's explicit choice
    (``--allow-cross-group-reorder`` / ``--keep-cross-group-order``); None applies the safe
    default: reorder across groups exactly when every rank provably runs this program in
    one common order (module docstring). ``estimator`` names the durations' source."""
    groups = sorted({graph.nodes[c].collective.group for c in graph.collectives()})
    unsafe = _not_spmd(graph, groups, estimator)
    if requested is not None:
        if requested:
            why = ("--allow-cross-group-reorder given" + (f", although {unsafe}" if unsafe else ""))
        else:
            why = "--keep-cross-group-order given"
        return CrossGroupRule(bool(requested), "flag", why)
    if len(groups) < 2:
        return CrossGroupRule(False, "one-group",
                              "collectives use at most one process group: there is no order "
                              "across groups to change")
    if unsafe:
        return CrossGroupRule(False, "not-proven", f"order across groups kept: {unsafe}")
    return CrossGroupRule(True, "spmd", (
        f"groups {', '.join(repr(g) for g in groups)} are each the world or a slice of a mesh "
        "dimension, so every rank runs this program and issues every group's collectives in "
        "the one order commopt writes: reordering across groups cannot deadlock"))


def within_groups(graph: Graph, cross: CrossGroupRule, requested: bool | None = True, *,
                  estimator: str | None = None) -> tuple[Graph, CrossGroupRule]:
    """``graph`` with the collectives of each group free to change their relative order too,
    and the cross-group rule that goes with it (reordering within a group includes reordering
    across groups). A group's members match collectives by the order they issue them; when
    every rank runs this program in commopt's one order, each group's collectives are issued
    in the same new order on all of them, which is all a group needs.

    ``requested``: None (``optimize``'s default) frees them exactly where that is proven
    (:func:`not_one_program`) and the user did not keep the order across groups
    (``--keep-cross-group-order``); True (``--reorder-within-groups``) is an
    :class:`OptionError` saying why where either fails; False (``--keep-group-order``) keeps
    every group's order. A graph whose groups have one collective each has no order within a
    group: it is returned as it is."""
    from commopt.errors import OptionError

    if requested is False or not _has_group_order(graph):
        return graph, cross
    why = not_one_program(graph, estimator)
    kept_across = not cross.allowed and cross.rule == "flag"
    if requested is None and (why or kept_across):
        return graph, cross
    if why:
        raise OptionError(f"--reorder-within-groups needs every rank to run this program in one "
                          f"order, which is not proven: {why}", field="reorder_within_groups")
    if kept_across:
        raise OptionError("--reorder-within-groups reorders across groups too; it cannot be "
                          "combined with --keep-cross-group-order", field="reorder_within_groups")
    rule = cross if cross.allowed else CrossGroupRule(True, cross.rule, cross.reason)
    return graph.without_group_order(), dataclasses.replace(
        rule, reason=rule.reason + "; collectives of one group may change their order too")


def keeps_group_order(graph: Graph, order) -> bool:
    """Whether ``order`` issues each group's collectives in the order the graph lists them
    (what the graph's group-order edges require; an order ``commopt optimize`` wrote with
    reordering within groups may not)."""
    from commopt.ir.schedule import Schedule

    pos = Schedule.of(graph, order).positions
    last: dict[str, int] = {}
    for c in graph.collectives():
        group = graph.nodes[c].collective.group
        if pos[c] < last.get(group, -1):
            return False
        last[group] = pos[c]
    return True


def _has_group_order(graph: Graph) -> bool:
    """Whether some group issues two or more collectives (so they have an order to keep)."""
    seen: set[str] = set()
    for c in graph.collectives():
        group = graph.nodes[c].collective.group
        if group in seen:
            return True
        seen.add(group)
    return False


def not_one_program(graph: Graph, estimator: str | None = None) -> str | None:
    """Why it is not proven that every rank runs this same program in one order, the proof a
    pass needs to change which collectives exist (bucketing: every rank must merge alike);
    None: proven. The reasons are the cross-group rule's (module docstring), for any number
    of groups."""
    groups = sorted({graph.nodes[c].collective.group for c in graph.collectives()})
    return _not_spmd(graph, groups, estimator)


def _not_spmd(graph: Graph, groups: list[str], estimator: str | None) -> str | None:
    """Why it is not proven that every rank runs this program in one order (None: proven)."""
    for c in graph.collectives():
        node = graph.nodes[c]
        if node.collective.type in POINT_TO_POINT:
            return (f"{node.name!r} is point-to-point ({node.collective.type}): ranks run "
                    "different programs (pipeline stages) whose order commopt does not see")
    if estimator is not None and any(m in estimator.split(",") for m in MEASURED_ESTIMATORS):
        return (f"durations are measured on this machine (estimator {estimator!r}): ranks "
                "running commopt on their own could get different orders")
    world = graph.world_size
    for name in groups:
        why = _not_replicated(graph, name, world)
        if why:
            return why
    return None


def _not_replicated(graph: Graph, name: str, world: int | None) -> str | None:
    """Why group ``name`` is not proven to be the world or one slice of a mesh dimension."""
    from commopt.io.groups import mesh_slices

    group = graph.groups.get(name)
    if group is None:
        return f"group {name!r} of a collective is not resolved"
    if world is None:
        return f"the world size is unknown, so group {name!r} may leave ranks out"
    if group.size == world and (group.ranks is None or sorted(group.ranks) == list(range(world))):
        return None
    mesh = graph.mesh or {}
    dim = group.mesh_dim
    if dim is not None and dim in mesh and mesh[dim] == group.size:
        slices = mesh_slices(mesh, dim)
        if group.ranks is None or sorted(group.ranks) in slices:
            return None
    return (f"group {name!r} ({group.size} of {world} ranks) is neither the world nor a slice "
            "of a recorded mesh dimension, so ranks outside it run another program")
