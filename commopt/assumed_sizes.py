"""What commopt assumed for a graph's data-dependent sizes, and how the result moves with them.

A mixture-of-experts program reads its all_to_all split sizes back from the data
(``.tolist()``): how many bytes each all_to_all moves, and how long the experts compute, is
only known when it runs. The loader assumes a value per symbol (:mod:`commopt.io.unbacked`)
and every estimate, simulation and plan uses it; this module turns that record into the
summary's ``data_dependent`` entry: the statement shown next to the numbers, the sizes, and
the same two orders (original and commopt's) simulated again with every data-dependent size
at a multiple of its assumed value, so the user sees how much the overlap depends on the
assumption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from commopt.errors import OptionError
from commopt.ir.graph import Graph
from commopt.ir.sizes import DataDependentSize, data_dependent_sizes, describe_assumptions
from commopt.schemas.summary import AssumedSize, DataDependentSizes, SimNumbers, SizeScenario

#: Multiples of the assumed values the summary simulates: half, as assumed, twice.
DEFAULT_SCALES = (0.5, 1.0, 2.0)


def scaled(sizes: Sequence[DataDependentSize], scale: float) -> dict[str, int]:
    """Every symbol at ``scale`` x its assumed value (rounded, at least 0)."""
    return {s.symbol: max(0, round(s.assumed * scale)) for s in sizes}


def statement(sizes: Sequence[DataDependentSize]) -> str:
    """The line every output shows next to numbers derived from assumed sizes."""
    colls = sorted({c for s in sizes for c in s.collectives})
    shown = ", ".join(colls[:4]) + (f" and {len(colls) - 4} more" if len(colls) > 4 else "")
    where = f" (they size {len(colls)} collective(s): {shown})" if colls else ""
    return (f"{len(sizes)} size(s) are data-dependent, known only when the program runs{where}; "
            f"every estimate, simulation and plan here assumes {describe_assumptions(sizes)}; "
            "set them with --assume SYMBOL=N or --assume '*=N'")


def sim_numbers(sim: Any) -> SimNumbers:
    """The summary's numbers of one simulated order (a :class:`~commopt.sim.SimResult`)."""
    return SimNumbers(makespan_us=sim.makespan_us, exposed_comm_us=sim.exposed_comm_us,
                      overlap_ratio=sim.overlap_ratio, peak_memory_bytes=sim.peak_memory_bytes)


def data_dependent_entry(graph: Graph, before: Sequence[int], after: Sequence[int],
                         durations: Callable[[Graph], list[float]] | None,
                         assumed: tuple[SimNumbers, SimNumbers],
                         scales: Sequence[float] = DEFAULT_SCALES, *,
                         compute_slowdown: float = 1.0) -> DataDependentSizes | None:
    """The summary's ``data_dependent`` entry of ``graph`` (None when every size is static).

    ``before``/``after``: the original order and commopt's; ``assumed``: their numbers at
    the assumed values (already simulated). For every other scale the graph is re-sized,
    re-estimated with ``durations`` and both orders simulated; without ``durations``
    (durations given by the caller, fixed per node) or without the program to re-size (a
    JSON file holds the numbers it was written with) only scale 1 is shown.
    """
    sizes = data_dependent_sizes(graph)
    if not sizes:
        return None
    # the archive reader re-sizes the program: imported only for a graph with such sizes
    from commopt.io.pt2 import apply_assumptions
    from commopt.sim import simulate

    for scale in scales:
        if not scale > 0:
            raise OptionError(f"size scales must be > 0, got {scale!r}", field="size_scales")
    scenarios = []
    for scale in sorted(set(scales) | {1.0}):
        if scale == 1.0:
            b, a = assumed
        elif durations is None or not can_resize(graph):
            continue
        else:
            g = apply_assumptions(graph, scaled(sizes, scale))
            d = durations(g)
            b, a = (sim_numbers(simulate(g, order, d, compute_slowdown=compute_slowdown))
                    for order in (before, after))
        scenarios.append(SizeScenario(scale=scale, before=b, after=a))
    return DataDependentSizes(
        statement=statement(sizes),
        sizes=[AssumedSize(symbol=s.symbol, assumed=s.assumed, basis=s.basis, reason=s.reason,
                           defined_by=s.defined_by, collectives=list(s.collectives), nodes=s.nodes,
                           low=s.low, high=s.high) for s in sizes],
        scenarios=scenarios,
    )


def can_resize(graph: Graph) -> bool:
    """Whether ``graph`` carries the program its data-dependent sizes can be re-derived from."""
    return graph.source_format == "pt2" and graph.payload is not None


def range_line(entry: DataDependentSizes) -> str:
    """``overlap 52%..71%, makespan 900..1,400 us at 0.5x..2x the assumed sizes``."""
    sc = entry.scenarios
    if len(sc) < 2:
        return ("the result at other sizes is not known here: durations were given per node, "
                "or the file holds fixed numbers (optimize the .pt2 to see the range)")
    over = [s.after.overlap_ratio for s in sc]
    mk = [s.after.makespan_us for s in sc]
    return (f"at {sc[0].scale:g}x..{sc[-1].scale:g}x the assumed sizes, commopt's order has overlap "
            f"{min(over):.1%}..{max(over):.1%} and makespan {min(mk):,.1f}..{max(mk):,.1f} us")
