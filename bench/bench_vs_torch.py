"""commopt against PyTorch's own overlap scheduler (``schedule_overlap_bucketing``).

For every benchmark graph (samples at world size 8 and the generated stacks of
:mod:`bench.graphs`): estimate every node once with commopt's analytical estimator, give
torch the same numbers (``custom_runtime_estimation``, see :mod:`bench.torch_peer`), run
torch with bucketing off and on at its default memory limits and commopt's default pipeline
at the same memory budget, then simulate and check every order with commopt's simulator and
invariant checker. A second table times both schedulers against node count. Method:
``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from bench import graphs, torch_peer
from bench.util import table

HARDWARE = "h100"
#: The scaling table's node counts (the quick run stops at the second).
SCALING_NODES = (2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
#: Wall-clock cap of one torch scheduler run in the scaling table, seconds.
TORCH_CAP_S = float(os.environ.get("COMMOPT_BENCH_TORCH_CAP_S", "120"))
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    """One schedule of one graph, simulated and checked."""

    schedule: str
    makespan_us: float | None = None
    lower_bound_us: float | None = None
    exposed_us: float | None = None
    peak_bytes: int | None = None
    wall_s: float | None = None
    check: str = ""
    note: str = ""
    #: invariant-1 breaks with every group's order free: data dependencies, waits, writes
    data_breaks: int = 0


def _checked(graph, order) -> tuple[str, int]:
    """Violations of ``order`` per invariant, against what commopt's rule allows any
    scheduler: reordering across groups, and within a group where every rank provably runs
    the program in one order (invariant 2 is checked only where that is not proven); and
    how many invariant-1 breaks it has with every group's order free (data dependencies,
    waits, writes: an order with any computes something else)."""
    from commopt.invariants import check_order

    free = graph.without_group_order()
    free_violations = check_order(free, order, allow_cross_group_reorder=True)
    allowed = _as_allowed(graph)
    violations = (free_violations if allowed is free
                  else check_order(allowed, order, allow_cross_group_reorder=True))
    data_breaks = sum(v.invariant == 1 for v in free_violations)
    if not violations:
        return "ok", data_breaks
    counts = Counter(v.invariant for v in violations)
    return ", ".join(f"inv{k}: {counts[k]}" for k in sorted(counts)), data_breaks


def _simulated(schedule: str, graph, order, durations, lower_bound_us: float, wall_s: float | None,
               note: str = "") -> Outcome:
    from commopt.sim import simulate

    sim = simulate(graph, order, durations)
    check, data_breaks = _checked(graph, order)
    if data_breaks and schedule.startswith("torch"):
        note = "; ".join(filter(None, [note, f"breaks {data_breaks} data dependencies: not a target"]))
    return Outcome(schedule, sim.makespan_us, lower_bound_us, sim.exposed_comm_us,
                   sim.peak_memory_bytes, wall_s, check, note, data_breaks)


def _as_allowed(graph):
    """``graph`` without its group order where every rank provably runs it in one order."""
    from commopt.cross_group import not_one_program

    return graph.without_group_order() if not_one_program(graph) is None else graph


def _commopt(graph, durations, increase_bytes: int, peak_bytes: int, lower_bound_us: float,
             label: str, cross_group: bool | None = True, within_groups: bool | None = None) -> Outcome:
    """``commopt.optimize`` (default pipeline) allowed ``increase_bytes`` above the original
    ``peak_bytes`` of live tensors (torch budgets nothing else); the wall time is the passes' own (the manager's checks and simulations
    between passes excluded). ``cross_group``: reorder collectives of different groups
    (True, as torch does), keep their order (False) or let commopt's rule decide (None, its
    default). ``within_groups``: None, commopt's default (collectives of one group may change
    their order where every rank provably runs the program in one order); False:
    ``--keep-group-order``."""
    import commopt
    from commopt.errors import OptionError

    fraction = max(-0.99, min(100.0, increase_bytes / max(1, peak_bytes)))
    # torch's scheduler budgets live tensors only (it has no persistent arenas): compare alike
    try:
        result = commopt.optimize(graph, durations_us=durations, max_memory_increase=fraction,
                                  allow_cross_group_reorder=cross_group, memory_accounting="live-tensors",
                                  reorder_within_groups=within_groups)
    except OptionError as exc:
        return Outcome(label, note=str(exc).split(": ", 1)[-1][:120])
    passes_s = sum(r.seconds for r in result.pipeline.records)
    note = f"cross-group rule: {result.summary.cross_group.rule}" if cross_group is None else ""
    return _simulated(label, graph, result.order, durations, lower_bound_us, passes_s, note)


def _torch(bg: graphs.BenchGraph, graph, chain, durations, bucketing: bool,
           lower_bound_us: float) -> Outcome:
    from commopt.estimators.hardware import load_hardware
    from commopt.io.groups import groups_document_of
    from commopt.io.pt2 import graph_from_torch

    label = "torch+bucketing" if bucketing else "torch"
    hw = load_hardware(HARDWARE)
    try:
        torch_peer.register_groups(graph)
        run = torch_peer.run_torch_scheduler(
            graph.payload.graph_module, torch_peer.estimation_for_module(graph, chain),
            bucketing=bucketing, dram_gbps=hw.memory_bandwidth_gbps,
            peak_tflops=hw.peak_tflops.get("bfloat16", 0.0),
        )
    except Exception as exc:  # torch failing on a graph is a finding, not a crash
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        return Outcome(label, note=f"torch failed: {type(exc).__name__}: {first}")
    if not run.changed_graph:
        order = torch_peer.order_from_names(graph, run.names)
        return _simulated(label, graph, order, durations, lower_bound_us, run.wall_s)
    bucketed = graph_from_torch(run.gm, groups=groups_document_of(graph))
    merged = len(graph.collectives()) - len(bucketed.collectives())
    out = _simulated(label, bucketed, bucketed.original_order, chain.durations(bucketed),
                     lower_bound_us, run.wall_s,
                     note=f"bucketed graph: {len(bucketed)} nodes, {merged} fewer collectives")
    # the bucketed graph is its own original: check its order against the loaded graph's
    broken = unmerged_group_order_breaks(graph, bucketed) if _as_allowed(graph) is graph else 0
    data_breaks = shared_data_breaks(graph, bucketed)
    if data_breaks:
        out = replace(out, data_breaks=data_breaks,
                      note=f"{out.note}; breaks {data_breaks} data dependencies: not a target")
    return replace(out, check=out.check if not broken else f"inv2: {broken} (unmerged)")


def shared_data_breaks(original, bucketed) -> int:
    """How many dependencies of ``original`` (data, waits, in-place writes; not a group's
    order) between nodes a bucketed graph kept (same name in both) its order runs backwards:
    invariant 1 on what can still be compared."""
    position = {bucketed.nodes[i].name: k for k, i in enumerate(bucketed.original_order)}
    at = [position.get(n.name) for n in original.nodes]
    ptr, idx = original.without_group_order().pred_arrays()  # data and ordering edges
    return sum(1 for b in range(len(original)) if at[b] is not None
               for k in range(ptr[b], ptr[b + 1]) if at[idx[k]] is not None and at[idx[k]] > at[b])


def unmerged_group_order_breaks(original, bucketed) -> int:
    """How many of the collectives a bucketed graph kept unmerged (same name in both) it
    issues after a later one of their group in ``original``: invariant 2 (same-group order)
    on what can still be compared. Checking the bucketed graph's order against itself says
    nothing, so this is the bucketed rows' check."""
    index = {original.nodes[c].name: c for c in original.collectives()}
    by_group: dict[str, list[int]] = {}
    for c in bucketed.original_order:
        node = bucketed.nodes[c]
        if node.collective is not None and node.name in index:
            by_group.setdefault(node.collective.group, []).append(index[node.name])
    broken = 0
    for issued in by_group.values():
        latest = -1
        for i in issued:
            if i < latest:
                broken += 1
            latest = max(latest, i)
    return broken


def compare_graph(bg: graphs.BenchGraph) -> tuple[dict, list[Outcome]]:
    """All schedules of one benchmark graph: original, torch (bucketing off, on), commopt
    at torch's default budget and at its own default budget."""
    from commopt.estimators import resolve
    from commopt.io import load_graph
    from commopt.passes import DEFAULT_MAX_MEMORY_INCREASE
    from commopt.sim import simulate

    graph = load_graph(bg.path)
    chain = resolve("analytical", hardware=HARDWARE)
    durations = chain.durations(graph)
    original = simulate(graph, graph.original_order, durations)
    # the bound of what the rule allows: a group's collectives in any order where proven
    lb = simulate(_as_allowed(graph), graph.original_order, durations).lower_bound_us
    outcomes = [_simulated("original", graph, graph.original_order, durations, lb, None)]
    outcomes.append(_torch(bg, graph, chain, durations, False, lb))
    outcomes.append(_torch(bg, graph, chain, durations, True, lb))
    peak = original.peak_memory_bytes
    outcomes.append(_commopt(graph, durations, torch_peer.torch_default_increase_bytes(peak), peak,
                             lb, EQUAL_BUDGET))
    outcomes.append(_commopt(graph, durations, int(peak * DEFAULT_MAX_MEMORY_INCREASE), peak, lb,
                             f"commopt (+{DEFAULT_MAX_MEMORY_INCREASE:.0%})"))
    if len({graph.nodes[c].collective.group for c in graph.collectives()}) > 1:
        for label, rule in ((DEFAULT_RULE, None), (KEPT_ORDER, False)):
            outcomes.append(_commopt(graph, durations, int(peak * DEFAULT_MAX_MEMORY_INCREASE), peak,
                                     lb, label, cross_group=rule))
    best = _best_torch(outcomes)
    if best is not None:
        # negative when torch's order peaks below the original: commopt is asked for that too
        outcomes.append(_commopt(graph, durations, best.peak_bytes - peak, peak, lb, EQUAL_PEAK))
        outcomes.append(_commopt(graph, durations, best.peak_bytes - peak, peak, lb, KEPT_GROUP_ORDER,
                                 within_groups=False))
    info = {"graph": bg.name, "nodes": len(graph), "collectives": len(graph.collectives())}
    return info, outcomes


EQUAL_PEAK = "commopt (torch's peak)"
DEFAULT_RULE = "commopt (+10%, default cross-group rule)"
KEPT_ORDER = "commopt (+10%, cross-group order kept)"
EQUAL_BUDGET = "commopt (torch's budget)"
KEPT_GROUP_ORDER = "commopt (torch's peak, --keep-group-order)"


def _best_torch(outcomes: list[Outcome]) -> Outcome | None:
    """The torch schedule with the smallest makespan among those that keep every data
    dependency (None when torch failed or none does): an order that reads a tensor after an
    in-place write it should precede computes something else, so its makespan is no target."""
    peers = [o for o in outcomes if o.schedule.startswith("torch") and o.makespan_us is not None
             and not o.data_breaks]
    return min(peers, key=lambda o: (o.makespan_us, o.schedule)) if peers else None


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:.3f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def _rows(info: dict, outcomes: list[Outcome]) -> list[list]:
    rows = []
    for o in outcomes:
        ratio = o.makespan_us / o.lower_bound_us if o.makespan_us and o.lower_bound_us else None
        rows.append([
            info["graph"], info["nodes"], info["collectives"], o.schedule,
            _fmt(ratio), _fmt(o.makespan_us / 1e3 if o.makespan_us is not None else None),
            _fmt(o.exposed_us / 1e3 if o.exposed_us is not None else None),
            f"{o.peak_bytes / 2**20:,.2f}" if o.peak_bytes is not None else "-",
            _fmt(o.wall_s), o.check or "-", o.note,
        ])
    return rows


def _verdict(ours: Outcome, best: Outcome) -> tuple[bool, str]:
    d_make = ours.makespan_us / best.makespan_us - 1
    d_peak = ours.peak_bytes - best.peak_bytes
    peak = f"{d_peak / 2**20:+,.2f} MiB" if abs(d_peak) >= 2**20 else f"{d_peak / 2**10:+,.1f} KiB"
    met = ours.makespan_us <= best.makespan_us * (1 + 1e-9) and d_peak <= 0
    return met, f"{'met' if met else 'missed'} ({d_make:+.2%} makespan, {peak} peak)"


def _targets(results: list[tuple[dict, list[Outcome]]]) -> tuple[str, list[str]]:
    """The makespan target per graph and the misses in words.

    The target is judged on ``commopt (torch's peak)`` (its budget is the peak the best torch
    schedule reached: equal memory); ``commopt (torch's budget)`` is shown beside it.
    """
    rows, misses = [], []
    gaps: dict[str, list[float]] = {EQUAL_PEAK: [], EQUAL_BUDGET: []}
    for info, outs in results:
        by = {o.schedule: o for o in outs}
        best = _best_torch(outs)
        for label, values in gaps.items():
            o = by.get(label)
            if o is not None and o.makespan_us is not None:
                values.append(o.makespan_us / o.lower_bound_us - 1)
        ours = by.get(EQUAL_PEAK)
        if best is None or ours is None or ours.makespan_us is None:
            rows.append([info["graph"], "-", "-", "-", "-",
                         "no torch order that keeps every data dependency", "-", "-"])
            continue
        met, verdict = _verdict(ours, best)
        budget, kept = by[EQUAL_BUDGET], by.get(KEPT_GROUP_ORDER)
        rows.append([info["graph"], best.schedule, _fmt(best.makespan_us / 1e3),
                     _fmt(ours.makespan_us / 1e3), f"{ours.makespan_us / ours.lower_bound_us - 1:.2%}",
                     verdict, _verdict(budget, best)[1] if budget.makespan_us is not None else "-",
                     _verdict(kept, best)[1] if kept is not None and kept.makespan_us is not None
                     else (kept.note if kept is not None else "-")])
        if not met:
            misses.append(f"{info['graph']}: {verdict.removeprefix('missed ')} against {best.schedule}")

    def mean(values: list[float]) -> str:
        return f"{sum(values) / len(values):.2%}" if values else "-"

    text = table(["graph", "best torch", "torch ms", "commopt ms (torch's peak)",
                  "commopt over LB", "target (torch's peak)", "at torch's budget",
                  "--keep-group-order (torch's peak)"], rows)
    text += (f"\n\nMean makespan over the lower bound (target: within 3%): `{EQUAL_PEAK}` "
             f"{mean(gaps[EQUAL_PEAK])}, `{EQUAL_BUDGET}` {mean(gaps[EQUAL_BUDGET])}.\n")
    return text, misses


def _torch_scaling(nodes: int, cap_s: float) -> tuple[float | None, str]:
    """torch's scheduler time on a stitched stack, in a subprocess killed ``cap_s`` after it
    reports that its graph is built (building and estimating are not capped)."""
    cmd = [sys.executable, "-m", "bench.torch_peer", str(nodes), HARDWARE]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        ready = proc.stdout.readline()
        if not ready.startswith("ready"):
            proc.wait()
            return None, f"failed before scheduling (exit {proc.returncode})"
        try:
            out, _ = proc.communicate(timeout=cap_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None, f"did not finish in {cap_s:.0f} s"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return None, f"failed while scheduling (exit {proc.returncode})"
    return json.loads(lines[-1])["wall_s"], ""


def scaling(quick: bool) -> str:
    """Scheduler wall time of torch and commopt against node count (stitched FSDP stacks)."""
    import commopt
    from commopt.estimators import resolve
    from commopt.io.groups import record_process_groups
    from commopt.io.pt2 import graph_from_torch

    graphs.init_fake_pg()
    rows = []
    torch_gave_up = False
    for target in SCALING_NODES[: 2 if quick else None]:
        gm = graphs.stacked_graph_module(target)
        graph = graph_from_torch(gm, groups=record_process_groups())
        del gm
        durations = resolve("analytical", hardware=HARDWARE).durations(graph)
        t0 = time.perf_counter()
        result = commopt.optimize(graph, durations_us=durations, allow_cross_group_reorder=True)
        total = time.perf_counter() - t0
        ours = sum(t.seconds for t in result.summary.timings.passes)  # both runs where there are two
        if torch_gave_up:
            theirs, note = None, "not run (a smaller graph already hit the cap)"
        else:
            theirs, note = _torch_scaling(target, TORCH_CAP_S)
            torch_gave_up = theirs is None
        print(f"   scaling {len(graph)} nodes: commopt {ours:.1f} s, torch {theirs or note}",
              file=sys.stderr, flush=True)
        speedup = f"{theirs / ours:.1f}x" if theirs else "-"
        final = result.pipeline.final
        rows.append([len(graph), len(graph.collectives()), _fmt(ours), _fmt(total),
                     _fmt(theirs) if theirs is not None else note, speedup,
                     _fmt(result.pipeline.initial.makespan_us / final.lower_bound_us),
                     _fmt(final.makespan_us / final.lower_bound_us)])
    return table(["nodes", "collectives", "commopt passes s", "commopt optimize() s",
                  "torch scheduler s", "speed-up (passes)", "original makespan / LB",
                  "commopt makespan / LB"], rows)


def run(quick: bool) -> str:
    """The comparison tables as a Markdown section (quick: the small graphs only)."""
    graphs.init_fake_pg()
    results = []
    for bg in graphs.benchmark_graphs(quick) + graphs.corpus_peer_graphs():
        t0 = time.perf_counter()
        results.append(compare_graph(bg))
        print(f"   {bg.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    rows = [r for info, outs in results for r in _rows(info, outs)]
    targets, misses = _targets(results)
    parts = [
        "## commopt vs PyTorch's overlap scheduler\n",
        f"Same cost model for both: commopt's analytical estimator ({HARDWARE}) passed to torch's "
        "`schedule_overlap_bucketing` as `custom_runtime_estimation`. Every order is simulated by "
        "commopt's simulator and checked by its invariant checker (`check`: violations per "
        "invariant, against what commopt's rule allows: collectives of one group may change their "
        "order where every rank provably runs the program in one order, so invariant 2 counts only "
        "elsewhere; inv1 there are the edges that queue a group's collectives). Makespan / LB is against the original graph's lower bound over the orders the rule allows (a group's collectives in any order where one order on every rank is proven); peak memory is "
        "the simulator's live bytes. torch runs at its default memory limits (+max(1 GiB, 5%)); "
        "`commopt (torch's budget)` gets the same increase in bytes. On graphs with several process groups, `commopt (+10%, default cross-group rule)` is what `commopt optimize` does by default (cross-group reordering where every rank provably runs the program in one order, docs/process-groups.md; the note names the rule) and `commopt (+10%, cross-group order kept)` is `--keep-cross-group-order`; the other commopt rows reorder across groups as torch does. The real-model corpus graphs are listed last: every one at world size 8 (`corpus/ws8:*`) and the 2-D ones at world size 4 (`corpus/ws4:*`). Every commopt row lets collectives of one group change their order where every rank provably runs the program in one order (commopt's default, as torch's orders do); `commopt (torch's peak, --keep-group-order)` keeps each group's order, to show what that freedom is worth. Both budget live tensors only (commopt with `memory_accounting='live-tensors'`: torch has no persistent arenas to count). Method: docs/benchmarks.md.\n",
        table(["graph", "nodes", "collectives", "schedule", "makespan / LB", "makespan ms",
               "exposed comm ms", "peak MiB", "scheduler s", "check", "note"], rows),
        "\n### Targets\n",
        targets,
    ]
    if misses:
        parts.append("Missed:\n\n" + "\n".join(f"- {m}" for m in misses) + "\n")
    parts += [
        "\n### Scheduler time against node count\n",
        "Stitched FSDP stacks (one exported layer copied, see `bench/graphs.py`); torch without "
        f"bucketing, capped at {TORCH_CAP_S:.0f} s per run; commopt: `commopt.optimize` with its "
        "default pipeline, the passes alone and the whole call (which also simulates and checks "
        "the order after every pass). The last two columns show commopt's schedule is not "
        "trivial at scale (torch's order is not simulated here).\n",
        scaling(quick),
    ]
    return "\n".join(parts)
