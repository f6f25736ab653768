"""Measured beside simulated: a profiled step's exposed communication per rank
(:mod:`commopt.measured`) next to the simulated before/after of the same graph."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.console import Console

from commopt.ir.graph import Graph
from commopt.schemas.measured import MeasuredOverlap
from commopt.schemas.report import OverlapReport


def build_measured(report: OverlapReport, graph: Graph,
                   traces: Sequence[str | os.PathLike[str]]) -> MeasuredOverlap:
    """Measure every trace in ``traces`` and pair them with ``report``'s simulated numbers."""
    from commopt.measured import measure

    ranks = measure(traces, collectives_per_step=len(graph.collectives()) or None)
    notes = []
    if any(r.steps is None for r in ranks):
        notes.append("the step count of some traces is unknown (no ProfilerStep markers, and "
                     "their collective count is not a multiple of the graph's): their numbers "
                     "are totals over the trace, not per step")
    devices = sorted({r.device for r in ranks})
    if devices == ["cpu"]:
        notes.append("CPU traces (gloo): communication is gloo's worker-thread time, compute the "
                     "aten ops of the issuing thread; the simulated numbers use the estimator's "
                     "machine and gloo spans include waiting for the slower peer, so compare the "
                     "exposed shares rather than the microseconds")
    return MeasuredOverlap(
        graph=report.graph, estimator=report.estimator,
        simulated_comm_us=report.before.total_comm_us,
        simulated_before_exposed_us=report.before.exposed_comm_us,
        simulated_after_exposed_us=report.after.exposed_comm_us if report.after is not None else None,
        ranks=ranks, notes=notes)


def measured_rows(m: MeasuredOverlap) -> tuple[list[str], list[list[str]]]:
    """Table rows: one per rank, measured per step, then the simulated exposure."""
    sim = ["simulated exposed" if m.simulated_after_exposed_us is None else "simulated before",
           *([] if m.simulated_after_exposed_us is None else ["simulated after"])]
    headers = ["rank", "trace", "steps", "comm", "compute", "exposed", "exposed share", *sim,
               "simulated share"]
    rows = []
    for r in m.ranks:
        share = r.exposed_comm_us / r.comm_us if r.comm_us > 0 else 0.0
        row = ["?" if r.rank is None else str(r.rank), r.trace, "?" if r.steps is None else str(r.steps),
               f"{r.comm_us:,.1f} us", f"{r.compute_us:,.1f} us", f"{r.exposed_comm_us:,.1f} us",
               f"{share:.1%}", f"{m.simulated_before_exposed_us:,.1f} us"]
        final = m.simulated_before_exposed_us
        if m.simulated_after_exposed_us is not None:
            final = m.simulated_after_exposed_us
            row.append(f"{final:,.1f} us")
        row.append(f"{final / m.simulated_comm_us:.1%}" if m.simulated_comm_us > 0 else "-")
        rows.append(row)
    return headers, rows


def render_measured_text(m: MeasuredOverlap, console: Console) -> None:
    """The measured-vs-simulated table and its notes on the terminal."""
    from commopt.report.text import _table, print_table

    headers, rows = measured_rows(m)
    right = tuple(h for h in headers if h not in ("trace",))
    print_table(console, _table(console, f"measured (per step) vs simulated ({m.estimator})",
                                headers, rows, right=right))
    for note in m.notes:
        console.print(f"note: {note}", markup=False)
