"""Windowed improvement for graphs too large to solve whole: a few hundred placed nodes at a
time are solved exactly with everything before them fixed (their times are constants) and
everything after them left in place; a window's new order is kept only when the whole
order's simulated makespan drops. No bound on the whole graph is proven this way."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from commopt.ir.graph import Graph
from commopt.sim.engine import node_times
from commopt.solver import cpsat
from commopt.solver.problem import Problem, assemble, storages

#: Placed nodes per window, and the step between windows (half: they overlap).
DEFAULT_WINDOW_NODES = 300


def improve_windows(graph: Graph, prob: Problem, order: Sequence[int], *, time_limit_s: float,
                    workers: int, accept: Callable[[list[int]], bool],
                    window_nodes: int = DEFAULT_WINDOW_NODES) -> tuple[list[int], str]:
    """Solve each window of ``order`` in turn (``time_limit_s`` shared among them); ``accept``
    takes a full order and says whether it is kept (strictly better, valid). Returns the last
    kept order and a note on what was done."""
    t0 = time.perf_counter()
    placed = set(prob.placed)
    seq = [i for i in order if i in placed]
    preds: dict[int, list[int]] = {}
    for p, s, _ in prob.edges:
        preds.setdefault(s, []).append(p)
    step = max(1, window_nodes // 2)
    starts = list(range(0, max(1, len(seq) - window_nodes + step), step))
    per_window = time_limit_s / len(starts)
    tried = kept = 0
    for a in starts:
        left = time_limit_s - (time.perf_counter() - t0)
        if left <= 0.05:
            break
        tried += 1
        new = _solve_window(graph, prob, seq, a, a + window_nodes, preds,
                            min(per_window, left), workers)
        for candidate in new or ():
            if accept(assemble(graph, candidate)):
                seq = candidate
                kept += 1
                break
    note = f"{kept} of {tried} windows ({len(starts)} in all, {window_nodes} placed nodes each) improved the order"
    return assemble(graph, seq), note


def _solve_window(graph: Graph, prob: Problem, seq: list[int], a: int, b: int,
                  preds: dict[int, list[int]], time_limit_s: float, workers: int) -> list[list[int]] | None:
    """``seq`` with ``seq[a:b]`` reordered by the solver (the most memory-friendly first), or
    None when it found nothing better for the window."""
    units = prob.units
    times = node_times(graph, assemble(graph, seq), [float(u) for u in units])
    window = seq[a:b]
    inside = set(window)

    def clock_after(i: int) -> int:
        return int(times.end[i] if prob.on_compute_stream(i) else times.issue[i])

    fixed = {p: cpsat.Fixed(clock_after(p), int(times.end[p]))
             for s in window for p in preds.get(s, ()) if p not in inside}
    if not graph.group_order:  # no edges queue a group's collectives: the earlier ones keep its stream busy
        fixed.update((p, cpsat.Fixed(clock_after(p), int(times.end[p])))
                     for p in seq[:a] if not prob.on_compute_stream(p))
    floor = max((int(times.end[i]) for i in seq[:a] if prob.on_compute_stream(i)), default=0)
    hint = {i: (clock_after(i) if not prob.on_compute_stream(i) else int(times.start[i]),
                int(times.start[i])) for i in window}
    horizon = max(int(times.end[i]) for i in window)
    sol = cpsat.solve(prob, window, hint=hint, horizon=horizon, time_limit_s=time_limit_s,
                      workers=workers, fixed=fixed, floor=floor,
                      stores=storages(graph)[0])
    if not sol.sequences or sol.objective is None or sol.objective >= horizon:
        return None
    return [seq[:a] + s + seq[b:] for s in sol.sequences]
