"""Estimators and simulator: profile accuracy on real traces, our collective model against
torch's ``comm_analysis``, and estimation / simulation time at 100,000 nodes."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from pathlib import Path

from bench.util import table

ROOT = Path(__file__).resolve().parent.parent
#: Real profiler traces; not in the repository (``COMMOPT_TRACES`` points at a copy).
TRACES = Path(os.environ.get("COMMOPT_TRACES", ROOT.parent / "shared" / "data" / "traces"))


# ---------------------------------------------------------------------------- profile accuracy
def _rel(pred: float, actual: float) -> float:
    return abs(pred - actual) / actual if actual > 0 else 0.0


def _score(model_traces, target, label: str, rows_coll: list, rows_comp: list, steps=None) -> None:
    """Fit on ``model_traces`` (restricted to ``steps``) on raw kernel durations and predict
    ``target``'s measured durations (waiting included: the version 1 model)."""
    from commopt.estimators.profile import ProfileEstimator, calibrate, fit_compute

    model = calibrate(model_traces, steps=steps, separate_waiting=False)
    est = ProfileEstimator(model)
    keep = (lambda s: s.step == target.steps[-1]) if steps is not None else (lambda s: True)
    by_type: dict[str, list[float]] = {}
    outside: dict[str, int] = {}
    for s in target.collectives:
        if not keep(s):
            continue
        pred = est.collective_us(s.type, s.group_size, s.size_bytes)
        if pred is None:
            outside[s.type] = outside.get(s.type, 0) + 1
            by_type.setdefault(s.type, [])
            continue
        by_type.setdefault(s.type, []).append(_rel(pred, s.duration_us))
    for ctype in sorted(by_type):
        errs = by_type[ctype]
        n = len(errs) + outside.get(ctype, 0)
        rows_coll.append((label, ctype, n, len(errs),
                          f"{statistics.median(errs):.1%}" if errs else "-",
                          f"{max(errs):.1%}" if errs else "-"))
    # compute: share of kernel time tied to an op, and accuracy of (op, shapes, dtypes) lookups
    lookup = {(e.op, tuple(tuple(x) for x in e.input_shapes), tuple(e.dtypes)): e.time_us
              for e in fit_compute([s for t in (model_traces if isinstance(model_traces, list) else [model_traces])
                                    for s in t.compute if steps is None or s.step in steps])}
    last = [s for s in target.compute if keep(s)]
    total = sum(s.duration_us for s in last)
    hit_time = 0.0
    errs = []
    for s in last:
        if s.input_shapes is None:
            continue
        pred = lookup.get((s.op, s.input_shapes, s.dtypes))
        if pred is not None:
            hit_time += s.duration_us
            errs.append(_rel(pred, s.duration_us))
    matched = target.matched_kernel_us / target.compute_kernel_us if target.compute_kernel_us else 0.0
    has_shapes = any(s.input_shapes for s in target.compute)
    rows_comp.append((label, f"{matched:.1%}", f"{hit_time / total:.1%}" if total and has_shapes else "no shapes",
                      f"{statistics.median(errs):.1%}" if errs else "-"))


def profile_accuracy(quick: bool) -> str:
    """Per trace: fit on all but the last profiler step, predict the last step."""
    from commopt.estimators.kineto import parse_trace

    if not TRACES.is_dir():
        return "_no real traces found (set COMMOPT_TRACES): profile accuracy skipped._\n"
    files = sorted((TRACES / "hta").glob("*.json.gz"))
    if quick:
        files = [f for f in files if f.name == "nccl_data.json.gz"]
    rows_coll: list = []
    rows_comp: list = []
    parse_s = []
    for f in files:
        t0 = time.perf_counter()
        tr = parse_trace(f)
        parse_s.append((f.name, time.perf_counter() - t0))
        if len(tr.steps) < 2:
            if tr.collectives or tr.compute:
                rows_comp.append((f.name, f"{tr.matched_kernel_us / tr.compute_kernel_us:.1%}"
                                  if tr.compute_kernel_us else "-", "one step", "-"))
            continue
        _score([tr], tr, f"{f.name} (step {tr.steps[-1]} from {tr.steps[:-1]})", rows_coll, rows_comp,
               steps=tr.steps[:-1])
    dlrm = sorted((TRACES / "param" / "dlrm_kineto").glob("worker*.json.gz"))
    if dlrm and not quick:
        parsed = [parse_trace(f) for f in dlrm]
        # one profiler step per file: fit on ranks 1-7, predict rank 0 (same step, other ranks)
        _score(parsed[1:], parsed[0], "dlrm_kineto (rank 0 from ranks 1-7)", rows_coll, rows_comp)
    out = ["### Profile estimator on real traces\n",
           "Raw kernel durations (waiting included, the version 1 fit): fit on every profiler step "
           "but the last, predict the last step's measured kernel durations (relative error "
           "|pred - measured| / measured). Collectives outside the measured size range "
           "fall back to analytical and are not scored (`scored` < `kernels`). What the estimator "
           "fits now is transfer time: see the next section.\n",
           table(["trace", "collective", "kernels", "scored", "median error", "worst error"], rows_coll),
           "",
           table(["trace", "kernel time matched to ops", "last-step kernel time with a profile entry",
                  "median error of those"], rows_comp),
           "",
           "Trace parse time: " + ", ".join(f"{n} {s:.2f} s" for n, s in parse_s) + ".\n"]
    return "\n".join(out)


# ---------------------------------------------------------------------------- transfer time
def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1%}" if xs else "-"


def _rank_from_others(parsed: list, label: str, rows: list) -> None:
    """Each rank's transfer time (matched across all ranks) predicted from a model calibrated
    on the other ranks only (their own matching), and by the raw-duration model of them."""
    from commopt.estimators.profile import ProfileEstimator, calibrate
    from commopt.estimators.waiting import match_collectives

    truth = match_collectives(parsed)
    errs: dict[str, list[list[float]]] = {}
    for t in parsed:
        others = [o for o in parsed if o is not t]
        est = ProfileEstimator(calibrate(others))
        raw = ProfileEstimator(calibrate(others, separate_waiting=False))
        for m in truth.matched:
            if t.rank not in m.ranks:
                continue
            i = m.ranks.index(t.rank)
            s, actual = m.samples[i], m.transfer_us[i]
            row = errs.setdefault(s.type, [[], [], [], [], []])  # kernels, errors, raw errors, waiting, abs
            row[0].append(1.0)
            pred, pred_raw = (e.collective_us(s.type, s.group_size, s.size_bytes) for e in (est, raw))
            if pred is not None and actual > 0:
                row[1].append(_rel(pred, actual))
                row[4].append(abs(pred - actual))
            if pred_raw is not None and actual > 0:
                row[2].append(_rel(pred_raw, actual))
            row[3].append(s.duration_us - actual)
    for ctype, (n, e_fit, e_raw, waiting, abs_err) in sorted(errs.items()):
        rows.append((label, ctype, len(n), len(e_fit), f"{statistics.median(waiting):,.0f}",
                     _median(e_fit), f"{max(e_fit):.0%}" if e_fit else "-",
                     f"{statistics.median(abs_err):,.1f}" if abs_err else "-", _median(e_raw)))


def _collective_from_others(parsed: list, label: str, rows: list) -> None:
    """Each matched collective's transfer predicted by a model calibrated on every other
    collective (all ranks): the size -> time model between sizes, not the same collective."""
    from dataclasses import replace

    from commopt.estimators.profile import ProfileEstimator, calibrate
    from commopt.estimators.waiting import match_collectives

    truth = match_collectives(parsed)
    errs: dict[str, list[float]] = {}
    kernels: dict[str, int] = {}
    for m in truth.matched:
        drop = {id(s) for s in m.samples}
        rest = [replace(t, collectives=[s for s in t.collectives if id(s) not in drop]) for t in parsed]
        est = ProfileEstimator(calibrate(rest))
        for s, actual in zip(m.samples, m.transfer_us, strict=True):
            kernels[s.type] = kernels.get(s.type, 0) + 1
            pred = est.collective_us(s.type, s.group_size, s.size_bytes)
            if pred is not None and actual > 0:
                errs.setdefault(s.type, []).append(_rel(pred, actual))
    for ctype in sorted(kernels):
        e = errs.get(ctype, [])
        rows.append((label, ctype, kernels[ctype], len(e), _median(e), f"{max(e):.0%}" if e else "-"))


def _envelope_vs_truth(parsed: list, label: str, rows: list) -> None:
    """One rank's trace alone (its lower envelope) against that rank's matched transfer."""
    from commopt.estimators.profile import ProfileEstimator, calibrate
    from commopt.estimators.waiting import match_collectives

    truth = match_collectives(parsed)
    errs: dict[str, list[float]] = {}
    for t in parsed:
        est = ProfileEstimator(calibrate([t]))
        for m in truth.matched:
            if t.rank in m.ranks:
                i = m.ranks.index(t.rank)
                s, actual = m.samples[i], m.transfer_us[i]
                pred = est.collective_us(s.type, s.group_size, s.size_bytes)
                if pred is not None and actual > 0:
                    errs.setdefault(s.type, []).append(_rel(pred, actual))
    for ctype, e in sorted(errs.items()):
        rows.append((label, ctype, len(e), _median(e), f"{max(e):.0%}"))


def _last_step_one_rank(trace, label: str, rows: list) -> None:
    """One rank, several steps: the transfer fit (lower envelope) of the earlier steps against
    the last step's measured durations, which are transfer + waiting (no transfer truth)."""
    from commopt.estimators.profile import ProfileEstimator, calibrate

    est = ProfileEstimator(calibrate([trace], steps=trace.steps[:-1]))
    full = ProfileEstimator(calibrate([trace]))
    by_type: dict[str, list] = {}
    for s in trace.collectives:
        if s.step != trace.steps[-1]:
            continue
        row = by_type.setdefault(s.type, [0, [], 0.0, 0.0, []])
        row[0] += 1
        pred = est.collective_us(s.type, s.group_size, s.size_bytes)
        ref = full.collective_us(s.type, s.group_size, s.size_bytes)
        if pred is None:
            continue
        row[1].append(pred <= s.duration_us * (1 + 1e-9))
        row[2] += pred
        row[3] += s.duration_us
        if ref:
            row[4].append(_rel(pred, ref))
    for ctype, (n, below, pred, measured, stable) in sorted(by_type.items()):
        rows.append((label, ctype, n, len(below), f"{sum(below) / len(below):.0%}" if below else "-",
                     f"{1 - pred / measured:.1%}" if measured else "-", _median(stable)))


def transfer_accuracy(quick: bool) -> str:
    """Transfer time: measured where several ranks' traces match, estimated from one rank."""
    from commopt.estimators.kineto import parse_trace

    if not TRACES.is_dir():
        return "_no real traces found (set COMMOPT_TRACES): transfer accuracy skipped._\n"
    dlrm = [parse_trace(f) for f in sorted((TRACES / "param" / "dlrm_kineto").glob("worker*.json.gz"))]
    sampled = [parse_trace(f) for f in sorted((TRACES / "hta").glob("sampled_rank-*.json.gz"))]
    rows_ranks: list = []
    rows_coll: list = []
    rows_env: list = []
    if dlrm:
        _rank_from_others(dlrm, f"dlrm_kineto ({len(dlrm)} ranks, step {dlrm[0].steps})", rows_ranks)
        _collective_from_others(dlrm, f"dlrm_kineto ({len(dlrm)} ranks)", rows_coll)
        _envelope_vs_truth(dlrm, "dlrm_kineto, each rank's trace alone", rows_env)
    if len(sampled) == 2 and not quick:
        _rank_from_others(sampled, "sampled_rank-0/1 (2 of 128 ranks: transfer is an upper bound)", rows_ranks)
    rows_steps: list = []
    singles = ["nccl_data.json.gz"] if quick else ["nccl_data.json.gz", "trace_diff_control.json.gz",
                                                   "sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
    for name in singles:
        f = TRACES / "hta" / name
        if f.is_file():
            tr = parse_trace(f)
            if len(tr.steps) >= 2:
                _last_step_one_rank(tr, f"{name} (step {tr.steps[-1]} from {tr.steps[:-1]})", rows_steps)
    return "\n".join([
        "### Profile estimator: transfer time, not waiting\n",
        "Most of an NCCL kernel's measured time is waiting for the slowest rank. Where several ranks' "
        "traces are given, `commopt calibrate` matches each collective across them; its transfer is its "
        "end minus the latest rank's start (clocks aligned on the collectives' ends), and the profile "
        "is fitted on that. **Each rank from the others**: the transfer time of every rank's "
        "collectives (matched across all ranks) predicted by a model calibrated on the other ranks' "
        "traces only; `raw fit` is the version 1 model (median raw durations of the other ranks) "
        "against the same transfer times. `median waiting` is per kernel, us.\n",
        table(["traces", "collective", "kernels", "scored", "median waiting us",
               "median error (transfer fit)", "worst error", "median abs error us",
               "median error (raw fit)"], rows_ranks),
        "",
        "A collective's transfer is the same on every rank, so a rank is predicted exactly where the "
        "other ranks include the group's latest starter; where the held-out rank was the latest, the "
        "others' transfer is an upper bound (`worst error`). **Each collective from the others** "
        "tests the size -> time model itself: every matched collective predicted by a model "
        "calibrated on all the other collectives of all ranks (sizes outside the others' range "
        "are not scored).\n",
        table(["traces", "collective", "kernels", "scored", "median error", "worst error"], rows_coll),
        "",
        "**One rank's trace alone** (the lower envelope: fastest per size, monotone, log-log lower "
        "hull) against that rank's transfer measured by matching all ranks: how well one rank can "
        "estimate transfer. With one profiler step every size is seen once, so a size whose only "
        "instance waited keeps its waiting.\n",
        table(["traces", "collective", "scored", "median error", "worst error"], rows_env),
        "",
        "**One rank, last step from the earlier steps.** No other rank's trace, so no measured "
        "transfer: the last step's measured durations are transfer + waiting. `pred <= measured`: "
        "share of the last step's kernels whose predicted transfer is at most their measured "
        "duration (it should be all); `waiting implied`: 1 - predicted / measured time of the last "
        "step; `vs whole-trace envelope`: median error against the envelope of every step "
        "(stability, not truth).\n",
        table(["trace", "collective", "kernels", "scored", "pred <= measured", "waiting implied",
               "vs whole-trace envelope"], rows_steps),
        "",
    ])


def comm_slowdown(quick: bool) -> str:
    """How much slower compute kernels run beside an NCCL kernel, per real trace (set)."""
    from commopt.estimators.kineto import parse_trace
    from commopt.estimators.slowdown import compute_slowdown

    if not TRACES.is_dir():
        return ""
    sets = [("hta/nccl_data", [TRACES / "hta" / "nccl_data.json.gz"])]
    if not quick:
        sets += [("hta/trace_diff_control", [TRACES / "hta" / "trace_diff_control.json.gz"]),
                 ("hta/sampled_rank-0/1", sorted((TRACES / "hta").glob("sampled_rank-*.json.gz"))),
                 ("param/dlrm_kineto (8 ranks)", sorted((TRACES / "param" / "dlrm_kineto").glob("*.json.gz")))]
    rows = []
    for label, files in sets:
        files = [f for f in files if f.is_file()]
        if not files:
            continue
        m = compute_slowdown([parse_trace(f) for f in files])
        rows.append((label, f"{m.factor:.3f}" if m else "-", m.kernel_kinds if m else 0,
                     m.overlapped_kernels if m else 0, m.alone_kernels if m else 0))
    return "\n".join([
        "### Compute slowdown beside communication\n",
        "Compute kernels that ran at least 90% inside an NCCL kernel against the same kernels "
        "(name, grid, block) with no NCCL kernel beside them: ratio of median times per kernel kind, "
        "geometric mean weighted by time beside. Measured and stored by `commopt calibrate`; "
        "`--compute-slowdown calibrated` applies it (next table).\n",
        table(["traces", "factor", "kernel kinds", "kernels beside", "kernels alone"], rows),
        "",
        slowdown_applied(quick, [(label, float(f)) for label, f, *_ in rows if f != "-"]),
    ])


def slowdown_applied(quick: bool, factors: list[tuple[str, float]]) -> str:
    """What the measured slowdowns do to the corpus graphs' schedules (world size 8, analytical
    H100): the default run's order simulated with the factor, against the run that applies it
    (``--compute-slowdown``: every order the passes keep is judged with it)."""
    import commopt
    from bench.graphs import corpus_peer_graphs
    from commopt.estimators import EstimatorOptions
    from commopt.io import load_graph
    from commopt.sim import simulate

    if not factors:
        return ""
    factors = [min(factors, key=lambda lf: lf[1]), max(factors, key=lambda lf: lf[1])]
    graphs = [g for g in corpus_peer_graphs() if g.name.startswith("corpus/ws8")]
    if quick:
        graphs = graphs[:3]
    rows = []
    for bg in graphs:
        graph = load_graph(bg.path)
        plain = commopt.optimize(graph)
        for label, factor in dict.fromkeys(factors):
            blind = simulate(plain.graph, plain.order, plain.durations_us, compute_slowdown=factor).makespan_us
            aware = commopt.optimize(graph, estimator=EstimatorOptions(compute_slowdown=repr(factor)))
            after = aware.summary.after.makespan_us
            rows.append((bg.name.split(":", 1)[1], f"{factor:.3f} ({label})", plain.summary.after.makespan_us,
                         blind, after, f"{(blind - plain.summary.after.makespan_us) / plain.summary.after.makespan_us:+.1%}",
                         f"{(after - blind) / blind:+.2%}"))
    return "\n".join([
        "Applied (`--compute-slowdown FACTOR`) on the corpus graphs at world size 8 (analytical, "
        "H100), with the smallest and largest factor above: the default run's makespan "
        "(without slowdown), that order simulated with the factor, and the run that applies the "
        "factor (its passes judge every order with it). The lower bound is the same in all three.\n",
        table(["graph", "factor", "makespan us", "same order slowed us", "planned with it us",
               "slowdown costs", "planning with it"], rows),
        "",
    ])


# ---------------------------------------------------------------------------- vs torch
@contextlib.contextmanager
def _torch_as_hopper():
    """Make torch's model believe it runs on NVLink-connected Hopper GPUs (we have no GPU)."""
    from torch._inductor import comm_analysis as ca

    saved = ca.get_gpu_type, ca._has_nvlink
    ca.get_gpu_type = lambda: ca.NVIDIA_GPU_TYPE.HOPPER
    ca._has_nvlink = lambda: True
    try:
        yield ca
    finally:
        ca.get_gpu_type, ca._has_nvlink = saved


def vs_torch(quick: bool) -> str:
    """Our ring model (H100 preset) against torch's comm_analysis on synthetic sizes and samples."""
    from commopt.estimators.analytical import AnalyticalEstimator, collective_time_us
    from commopt.estimators.hardware import PRESETS
    from commopt.io import load_graph

    hw = PRESETS["h100"]
    kinds = {"all_reduce": "ALL_REDUCE", "all_gather": "ALL_GATHER",
             "reduce_scatter": "REDUCE_SCATTER", "all_to_all": "ALL_TO_ALL"}
    rows = []
    with _torch_as_hopper() as ca:
        for ctype, tname in kinds.items():
            for n, hosts in ((8, 1), (16, 2)):
                for size in (1 << 20, 64 << 20, 1 << 30):
                    ours = collective_time_us(hw, ctype, size, n, hosts)
                    # torch's FX path passes input + output bytes as the size
                    io_bytes = {"all_reduce": 2 * size, "all_to_all": 2 * size}.get(ctype, size + size // n)
                    theirs = ca.estimate_nccl_collective_runtime_impl(io_bytes, n, ca.NCCL_COLL[tname]) * 1e3
                    rows.append((ctype, n, f"{size >> 20} MiB", ours, theirs, ours / theirs if theirs else 0.0))
        sample_rows = []
        for path in sorted((ROOT / "sample_graphs" / "ws8").glob("*.json")):
            g = load_graph(path)
            est = AnalyticalEstimator("h100")
            ours_total = theirs_total = 0.0
            for c in g.collectives():
                node = g.nodes[c]
                info = node.collective
                tname = kinds.get(info.type)
                if tname is None:
                    continue
                ours_total += est.estimate(node, g)
                n = g.groups[info.group].size
                theirs_total += ca.estimate_nccl_collective_runtime_impl(
                    info.in_bytes + info.out_bytes, n, ca.NCCL_COLL[tname]) * 1e3
            sample_rows.append((path.stem, len(g.collectives()), ours_total, theirs_total,
                                ours_total / theirs_total if theirs_total else 0.0))
    return "\n".join([
        "### Collective model: commopt analytical (H100 preset) vs torch `comm_analysis`\n",
        "torch's model is forced to Hopper + NVLink (no GPU here) and given input + output bytes, "
        "as its FX path does; ours uses the message (max of in/out) with ring factors. "
        "8 ranks = one node, 16 ranks = two nodes. Times in us.\n",
        table(["collective", "ranks", "message", "commopt us", "torch us", "ratio"], rows),
        "",
        table(["sample (ws8)", "collectives", "commopt total us", "torch total us", "ratio"], sample_rows),
        "",
    ])


# ---------------------------------------------------------------------------- speed
def speed(quick: bool) -> str:
    """Estimation and simulation wall time on a synthetic graph of about 100,000 nodes."""
    from commopt.estimators import resolve
    from commopt.sim import peak_memory, simulate
    from commopt.synth import graph_with_nodes

    target = 10_000 if quick else 100_000
    probe = graph_with_nodes(2_000)
    g = graph_with_nodes(int(2_000 * target / len(probe)))
    rows = []
    t0 = time.perf_counter()
    resolve("analytical").durations(graph_with_nodes(100))  # imports torch's flop formulas
    rows.append(("first use (imports torch.utils.flop_counter)", 0, time.perf_counter() - t0, 0.0))
    t0 = time.perf_counter()
    chain = resolve("analytical")
    durations = chain.durations(g)
    t_est = time.perf_counter() - t0
    rows.append(("estimate (analytical, cold cache)", len(g), t_est, t_est / len(g) * 1e4))
    order = g.original_order
    t0 = time.perf_counter()
    sim = simulate(g, order, durations)
    t_sim = time.perf_counter() - t0
    rows.append(("simulate, first call (with memory and lower bound)", len(g), t_sim, t_sim / len(g) * 1e4))
    reversed_waits = _late_waits_order(g)
    t0 = time.perf_counter()
    simulate(g, reversed_waits, durations)
    t_sim2 = time.perf_counter() - t0
    rows.append(("simulate, another order (per-graph facts cached)", len(g), t_sim2, t_sim2 / len(g) * 1e4))
    t0 = time.perf_counter()
    peak_memory(g, order)
    t_mem = time.perf_counter() - t0
    rows.append(("peak_memory alone", len(g), t_mem, t_mem / len(g) * 1e4))
    return "\n".join([
        f"### Estimation and simulation speed ({len(g):,} nodes, {len(g.collectives()):,} collectives)\n",
        table(["step", "nodes", "seconds", "seconds per 10k nodes"], rows),
        "",
        f"Simulated original order: makespan {sim.makespan_us:,.0f} us, exposed communication "
        f"{sim.exposed_comm_us:,.0f} us, lower bound {sim.lower_bound_us:,.0f} us "
        "(analytical estimates, H100).\n",
    ])


def _late_waits_order(g) -> list[int]:
    """The original order with every wait moved to just before its first user (a valid order)."""
    n = len(g.nodes)
    waits = {w for w in g.waits()}
    first_user: dict[int, int] = {}
    for w in sorted(waits):
        users = [s for s in g.succs(w)]
        first_user[w] = min(users) if users else n
    before: dict[int, list[int]] = {}
    for w, u in first_user.items():
        before.setdefault(u, []).append(w)
    order = []
    for i in range(n):
        order.extend(before.get(i, ()))
        if i not in waits:
            order.append(i)
    order.extend(before.get(n, ()))
    return order


def run(quick: bool) -> str:
    """The estimators section of BENCHMARKS.md."""
    return "\n".join(["## Estimators and simulator\n", speed(quick), profile_accuracy(quick),
                      transfer_accuracy(quick), comm_slowdown(quick), vs_torch(quick)])
