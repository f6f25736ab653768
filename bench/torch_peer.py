"""Run PyTorch's own FX overlap scheduler on a graph and map its order back to commopt.

The peer is ``torch._inductor.fx_passes.overlap_scheduling.schedule_overlap_bucketing``
(torch 2.13). What it needs, found by running it on exported graphs:

- a ``torch.fx.GraphModule`` whose nodes carry ``meta["val"]`` (fake tensors): use
  ``ExportedProgram.graph_module`` (parameters are placeholders), decomposed to core ATen so
  matmuls are ``aten.mm``/``aten.bmm`` (its compute nodes are the ops in torch's FLOP
  registry; ``aten.matmul`` is not one);
- functional collectives: ``_c10d_functional.<collective>`` + ``wait_tensor`` (nothing to do
  without a ``wait_tensor``: it returns the module unchanged);
- an initialised default process group (it asks for the world size): the fake backend is
  enough (:func:`bench.graphs.init_fake_pg`);
- on a machine without a GPU: ``compute_estimator="analytical"`` (its default, "benchmark",
  runs every op on the device), and a value for the device's memory bandwidth and peak
  FLOP/s, because it computes a roofline estimate for every compute node *before*
  consulting ``custom_runtime_estimation`` and that roofline asks Triton, which a CPU build
  lacks. :func:`cpu_roofline_shim` supplies the hardware preset's numbers; the roofline is
  then discarded in favour of the custom estimate, so it does not change the schedule.

Same cost model: ``custom_runtime_estimation(node, override_size)`` returns commopt's
estimate in milliseconds (torch's unit) for every node commopt knows, and for
``override_size`` (torch asks a collective's time at another size, 0 for its latency)
commopt's collective model at that size.

Bucketing: with ``bucketing=True`` torch first pre-buckets FSDP collectives (new
``cat``/``copy_``/bucketed-collective nodes), schedules, then merges more collectives
(``collective_bucketing``). The pre-bucketed graph is loaded into commopt's IR again so the
new nodes get commopt estimates before scheduling; the final bucketed GraphModule is loaded
once more (``graph_from_torch``) and simulated in its own (torch's) order.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from commopt.errors import GraphError
from commopt.ir.graph import Graph, NodeKind

#: torch's custom estimation hook: (fx node, override size in bytes or None) -> ms or None.
TorchEstimation = Callable[[Any, "int | None"], "float | None"]


@contextlib.contextmanager
def cpu_roofline_shim(dram_gbps: float, peak_tflops: float) -> Iterator[None]:
    """Answer torch's device-bandwidth and peak-FLOP queries without Triton or a GPU.

    torch's roofline (computed and then overridden by the custom estimate) otherwise fails
    with ``ModuleNotFoundError: triton`` on CPU builds.
    """
    import torch.utils._runtime_estimation as runtime_estimation

    saved = runtime_estimation.get_gpu_dram_gbps, runtime_estimation.get_device_tflops
    runtime_estimation.get_gpu_dram_gbps = lambda: dram_gbps
    runtime_estimation.get_device_tflops = lambda dtype: peak_tflops
    try:
        yield
    finally:
        runtime_estimation.get_gpu_dram_gbps, runtime_estimation.get_device_tflops = saved


def register_groups(graph: Graph) -> None:
    """Make every process group of ``graph`` resolvable by its c10d name in this process.

    torch's scheduler looks group names up in the live registry (for its own NCCL estimate,
    which it logs even when a custom estimate is given); a graph exported in another
    process names groups this process never created. Each missing name is registered as a
    new fake-backend group with the recorded ranks (or the first ``size`` ranks).
    """
    import torch.distributed as dist
    from torch._C._distributed_c10d import _register_process_group, _resolve_process_group

    for name, pg in sorted(graph.groups.items()):
        try:
            _resolve_process_group(name)
            continue
        except RuntimeError:
            pass
        ranks = list(pg.ranks) if pg.ranks is not None else list(range(pg.size))
        _register_process_group(name, dist.new_group(ranks))


@contextlib.contextmanager
def quiet_inductor_logs() -> Iterator[None]:
    """Silence torch's INFO logging of scheduling statistics while the peer runs."""
    names = ("torch._inductor", "torch._inductor.fx_passes.fsdp",
             "torch._inductor.fx_passes.overlap_scheduling", "torch.distributed")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def custom_estimation(
    graph: Graph,
    durations_us: Sequence[float],
    collective_time_us: Callable[[int, int], float] | None = None,
) -> TorchEstimation:
    """torch's ``custom_runtime_estimation`` answering with commopt's estimates.

    ``graph`` must be the IR of the FX graph torch schedules (node names are FX names);
    ``durations_us`` commopt's per-node durations; ``collective_time_us(index, size_bytes)``
    commopt's time for collective ``index`` at another message size (torch asks when it
    weighs bucketing). Nodes commopt does not know get ``None`` (torch's own fallback).
    """
    index_of = graph.index_of
    nodes = graph.nodes

    def estimate(fx_node: Any, override_size: int | None) -> float | None:
        i = index_of.get(fx_node.name)
        if i is None:
            return None
        if override_size is not None and nodes[i].kind is NodeKind.COLLECTIVE:
            if collective_time_us is None:
                return None
            return collective_time_us(i, int(override_size)) / 1e3
        return float(durations_us[i]) / 1e3

    return estimate


def order_from_names(graph: Graph, names: Sequence[str]) -> list[int]:
    """commopt node indices of ``names`` (an FX node order), as a permutation of ``graph``.

    Raises :class:`GraphError` when a name is unknown to the IR or a node is missing: the
    scheduled FX graph then is not the graph the IR was built from.
    """
    index_of = graph.index_of
    order: list[int] = []
    for name in names:
        i = index_of.get(name)
        if i is None:
            raise GraphError("torch's schedule has a node commopt's IR does not", node=name)
        order.append(i)
    if len(order) != len(graph) or len(set(order)) != len(order):
        seen = set(order)
        missing = [n.name for n in graph.nodes if n.index not in seen]
        raise GraphError(
            f"torch's schedule lists {len(order)} nodes for an IR of {len(graph)}"
            + (f"; missing {missing[:3]}" if missing else ""),
            node=missing[0] if missing else None,
        )
    return order


@dataclass
class TorchSchedule:
    """The result of one torch scheduler run.

    ``gm`` is the scheduled GraphModule (merged collectives when bucketing), ``names`` its
    node names in torch's order, ``wall_s`` torch's own time (pre-bucketing + scheduling +
    bucketing; loading and estimating in commopt excluded), ``pre_bucket_s`` the
    pre-bucketing share of it, ``changed_graph`` whether the node set differs from the input.
    """

    gm: Any
    names: list[str]
    wall_s: float
    pre_bucket_s: float
    bucketing: bool
    changed_graph: bool


def run_torch_scheduler(
    gm: Any,
    estimation_for: Callable[[Any], TorchEstimation],
    *,
    bucketing: bool,
    dram_gbps: float,
    peak_tflops: float,
    copy_module: bool = True,
    **options: Any,
) -> TorchSchedule:
    """Run ``schedule_overlap_bucketing`` on (a deep copy of) ``gm`` with torch's default
    memory limits and return its order.

    ``estimation_for(gm)`` builds the custom estimation for the module torch is about to
    schedule: the input, or with ``bucketing`` the module after FSDP pre-bucketing (new
    nodes need estimates). ``options`` override other ``schedule_overlap_bucketing``
    arguments. Without bucketing the node set is unchanged and the order maps onto the IR
    of ``gm`` with :func:`order_from_names`.
    """
    from torch._inductor.fx_passes.fsdp import pre_bucket_fsdp_collectives
    from torch._inductor.fx_passes.overlap_scheduling import schedule_overlap_bucketing
    from torch._inductor.pattern_matcher import stable_topological_sort

    work = copy.deepcopy(gm) if copy_module else gm
    before = [n.name for n in work.graph.nodes]
    with cpu_roofline_shim(dram_gbps, peak_tflops), quiet_inductor_logs():
        pre_bucket_s = 0.0
        if bucketing:
            t0 = time.perf_counter()
            pre_bucket_fsdp_collectives(work)
            pre_bucket_s = time.perf_counter() - t0
            # pre-bucketing leaves new nodes out of topological order; the scheduler sorts
            # first thing anyway, so sorting here only lets commopt's loader read the module
            stable_topological_sort(work.graph)
        estimation = estimation_for(work)
        t0 = time.perf_counter()
        out = schedule_overlap_bucketing(
            work,
            custom_runtime_estimation=estimation,
            compute_estimator="analytical",
            collective_estimator="analytical",
            collective_bucketing=bucketing,
            pre_bucketing_fsdp_collectives=False,
            **options,
        )
        wall_s = time.perf_counter() - t0 + pre_bucket_s
    names = [n.name for n in out.graph.nodes]
    return TorchSchedule(
        gm=out, names=names, wall_s=wall_s, pre_bucket_s=pre_bucket_s, bucketing=bucketing,
        changed_graph=sorted(names) != sorted(before),
    )


def collective_time_at(chain: Any, graph: Graph) -> Callable[[int, int], float]:
    """``(index, size_bytes) -> us``: ``chain``'s estimate for collective ``index`` of
    ``graph`` carrying ``size_bytes`` instead of its own message (torch's ``override_size``)."""
    from dataclasses import replace

    def at(i: int, size_bytes: int) -> float:
        node = graph.nodes[i]
        info = replace(node.collective, in_bytes=size_bytes, out_bytes=size_bytes)
        return chain.estimate(replace(node, collective=info, duration_us=None), graph)[0]

    return at


def torch_default_increase_bytes(peak_bytes: int) -> int:
    """The peak-memory increase torch allows by default: ``max(1 GiB, 5% of the peak)``
    (``max_memory_increase_gb=1.0``, ``max_memory_increase_ratio=0.05``)."""
    return max(1024**3, int(peak_bytes * 0.05))


def estimation_for_module(base: Graph, chain: Any) -> Callable[[Any], TorchEstimation]:
    """``estimation_for`` for :func:`run_torch_scheduler`: the IR of ``base`` while torch's
    module still has ``base``'s nodes, else the module loaded into commopt's IR again (FSDP
    pre-bucketing added nodes), estimated with ``chain``."""
    from commopt.io.groups import groups_document_of
    from commopt.io.pt2 import graph_from_torch

    def build(gm: Any) -> TorchEstimation:
        graph = base
        if any(n.name not in base.index_of for n in gm.graph.nodes):
            graph = graph_from_torch(gm, groups=groups_document_of(base))
        durations = chain.durations(graph)
        return custom_estimation(graph, durations, collective_time_at(chain, graph))

    return build


def _stacked_main(argv: list[str] | None = None) -> int:
    """``python -m bench.torch_peer NODES HARDWARE``: time torch's scheduler (no bucketing) on
    a stitched FSDP stack of about NODES nodes. Prints ``ready`` once the graph is built, then
    one JSON line. The scaling table runs this in a subprocess so a run past its time cap can
    be killed."""
    import json
    import sys

    from bench import graphs
    from commopt.estimators import resolve
    from commopt.estimators.hardware import load_hardware
    from commopt.io.groups import record_process_groups
    from commopt.io.pt2 import graph_from_torch

    args = sys.argv[1:] if argv is None else argv
    target, hardware = int(args[0]), args[1]
    graphs.init_fake_pg()
    gm = graphs.stacked_graph_module(target)
    graph = graph_from_torch(gm, groups=record_process_groups())
    chain = resolve("analytical", hardware=hardware)
    hw = load_hardware(hardware)
    print("ready", flush=True)
    run = run_torch_scheduler(
        gm, estimation_for_module(graph, chain), bucketing=False, copy_module=False,
        dram_gbps=hw.memory_bandwidth_gbps, peak_tflops=hw.peak_tflops.get("bfloat16", 0.0),
    )
    print(json.dumps({"nodes": len(graph), "wall_s": run.wall_s}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_stacked_main())
