"""Reading PyTorch profiler (Kineto) Chrome-trace JSON into cost samples.

What comes out (the two trace formats are described in ``docs/estimators.md``):

- one :class:`CollectiveSample` per NCCL kernel: the collective from the kernel's own args
  (newer traces: ``Collective name``, ``In/Out msg nelems``, ``dtype``, ``Group size``), else
  from the CPU side that launched it (older traces: the ``nccl:*`` annotation or
  ``record_param_comms`` enclosing the launch, sizes from ``Input Dims``); the kernel name is
  never trusted (all_to_all runs as ``SendRecv``, float broadcasts as ``..._int8_t``);
- one :class:`ComputeSample` per CPU op that launched compute kernels (kernel times summed),
  keyed by op, tensor input shapes and dtypes; kernels are tied to ops through the shared
  ``External id`` (newer traces) or through ``correlation`` -> the launching runtime call ->
  the innermost CPU op around it on that thread (older traces);
- CPU-only traces (gloo): collectives from the ``gloo:*`` annotations on gloo's worker
  threads, compute from the ``aten::`` CPU ops themselves.

Every sample carries the profiler step (``ProfilerStep#N``) its launch fell in.
"""

from __future__ import annotations

import gzip
import math
import zlib
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from commopt.errors import CommoptError
from commopt.ir.validate import MAX_DURATION_US, MAX_TENSOR_BYTES, MAX_WORLD_SIZE


class TraceError(CommoptError):
    """A trace file that cannot be read as a Kineto Chrome trace."""


#: c10d / NCCL / annotation spellings -> IR collective types.
_COLLECTIVE_NAMES = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "_allgather_base": "all_gather",
    "_all_gather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather", "allgather_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter": "reduce_scatter",
    "all_to_all": "all_to_all", "all_to_allv": "all_to_all", "alltoall": "all_to_all",
    "alltoall_base": "all_to_all", "all_to_all_single": "all_to_all",
    "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
    "barrier": "barrier", "gather": "gather", "scatter": "scatter",
}

#: dtype spellings in traces -> IR dtype names.
_DTYPES = {
    "float": "float32", "Float": "float32", "double": "float64", "Double": "float64",
    "c10::Half": "float16", "Half": "float16", "c10::BFloat16": "bfloat16", "BFloat16": "bfloat16",
    "long int": "int64", "long": "int64", "Long": "int64", "int": "int32", "Int": "int32",
    "short int": "int16", "Short": "int16", "signed char": "int8", "Char": "int8",
    "unsigned char": "uint8", "Byte": "uint8", "bool": "bool", "Bool": "bool",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
}
_DTYPE_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
                "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def collective_type(name: str) -> str | None:
    """IR collective type of a c10d / annotation name (``nccl:all_to_all`` -> ``all_to_all``)."""
    base = name.strip()
    for prefix in ("c10d::", "nccl:", "gloo:", "_c10d_functional::", "_c10d_functional."):
        if base.startswith(prefix):
            base = base[len(prefix):]
            break
    base = base.rstrip("_")
    return _COLLECTIVE_NAMES.get(base) or _COLLECTIVE_NAMES.get(base.lstrip("_"))


def trace_dtype(name: str | None) -> str | None:
    """IR dtype name of a trace dtype spelling (None when it is not a tensor dtype)."""
    if not name:
        return None
    return _DTYPES.get(name)


@dataclass(frozen=True, slots=True)
class CollectiveSample:
    """One measured collective: type, ranks, message bytes (max of in/out), duration."""

    type: str
    group_size: int
    size_bytes: int
    duration_us: float
    step: int | None
    info_from: str  # "kernel args", "cpu annotation", "kernel name"
    group: str | None = None
    dtype: str | None = None
    start_us: float | None = None  # when the kernel (or the gloo annotation) started
    stream: int | str | None = None  # the device stream it ran on (GPU traces; None on CPU)

    @property
    def end_us(self) -> float | None:
        """When it ended (None when the start is unknown)."""
        return None if self.start_us is None else self.start_us + self.duration_us


@dataclass(frozen=True, slots=True)
class KernelSpan:
    """One GPU compute kernel: what ran (name, launch geometry) and when."""

    key: str  # kernel name + grid + block: the same key runs the same work
    start_us: float
    duration_us: float
    stream: int | str | None


@dataclass(frozen=True, slots=True)
class ComputeSample:
    """One CPU op's device time: the kernels it launched, summed (or its own CPU time on CPU)."""

    op: str  # "aten.mm"
    input_shapes: tuple[tuple[int, ...], ...] | None
    dtypes: tuple[str, ...] | None
    duration_us: float
    kernels: int
    step: int | None


@dataclass
class KinetoTrace:
    """What one trace file yields."""

    path: str
    device: str
    world_size: int | None
    rank: int | None
    collectives: list[CollectiveSample] = field(default_factory=list)
    compute: list[ComputeSample] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    compute_kernel_us: float = 0.0
    matched_kernel_us: float = 0.0
    nccl_kernels: int = 0
    #: every compute kernel (GPU traces), for the slowdown under communication
    kernel_spans: list[KernelSpan] = field(default_factory=list)
    #: (start, end) of every NCCL kernel, also those whose collective is unknown
    nccl_spans: list[tuple[float, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_trace_json(path: str | Path) -> dict[str, Any]:
    """The trace's top-level object (``.gz`` or plain); TraceError when it is not Kineto JSON
    (read like every JSON input: :func:`commopt.io.json_graph.parse_json_bytes`)."""
    from commopt.io.json_graph import parse_json_bytes

    p = Path(path)
    if not p.is_file():
        raise TraceError("no such trace file", file=str(p))
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"not a Kineto trace (JSON expected): {exc}", file=str(p)) from None
    try:
        data = parse_json_bytes(raw, file=str(p), error=TraceError)
    except TraceError as exc:
        exc.message = f"not a Kineto trace (JSON expected): {exc.message}"
        exc.args = (exc.message,)
        raise
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError("not a Kineto trace: no 'traceEvents' list at the top level", file=str(p))
    return data


#: What a directory of traces holds: :func:`trace_files` takes these, sorted by name.
TRACE_PATTERNS = ("*.json", "*.json.gz")


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files ``paths`` name: a file as it is, a directory as every ``*.json`` and
    ``*.json.gz`` file directly in it, sorted by name (the runner's ``--profile DIR`` writes
    one per rank). A file named twice (e.g. in its directory and alone) counts once. A
    directory without a trace, or a path that does not exist, is a TraceError."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted({f for pattern in TRACE_PATTERNS for f in path.glob(pattern) if f.is_file()})
            if not found:
                raise TraceError(f"no trace files ({', '.join(TRACE_PATTERNS)}) in the directory",
                                 file=str(path))
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise TraceError("no such trace file or directory", file=str(path))
    unique: dict[Path, Path] = {}
    for f in files:
        unique.setdefault(f.resolve(), f)
    return list(unique.values())


def _tensor_inputs(args: dict[str, Any]) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]] | None:
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    shapes: list[tuple[int, ...]] = []
    dtypes: list[str] = []
    for d, t in zip(dims, types, strict=False):
        dt = trace_dtype(t) if isinstance(t, str) else None
        if dt is None or not isinstance(d, list) or any(type(x) is not int for x in d):
            continue
        if any(x < 0 for x in d) or math.prod(d) > MAX_TENSOR_BYTES:
            raise TraceError(f"'Input Dims' {_shown(d)}: sizes are non-negative integers, at most "
                             f"{MAX_TENSOR_BYTES:,} elements in all", field="args.Input Dims")
        shapes.append(tuple(d))
        dtypes.append(dt)
    return tuple(shapes), tuple(dtypes)


def _op_name(name: str) -> str:
    return name.replace("::", ".")


def _enclosing_stacks(events: list[dict[str, Any]], times: list[float]) -> dict[float, list[dict[str, Any]]]:
    """For each time in ``times``: the events of one thread containing it, innermost first.

    One sweep over the thread's events sorted by start (outer before inner on ties) with a
    stack of open events: linear in events + queries.
    """
    events = sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0)))
    out: dict[float, list[dict[str, Any]]] = {}
    stack: list[tuple[float, dict[str, Any]]] = []
    i = 0
    for t in sorted(set(times)):
        while i < len(events) and events[i]["ts"] <= t:
            e = events[i]
            while stack and stack[-1][0] < e["ts"]:
                stack.pop()
            stack.append((e["ts"] + e.get("dur", 0), e))
            i += 1
        while stack and stack[-1][0] < t:
            stack.pop()
        out[t] = [e for end, e in reversed(stack) if end >= t]
    return out


def parse_trace(path: str | Path) -> KinetoTrace:
    """Read a Kineto trace into collective and compute samples (see the module docstring)."""
    data = read_trace_json(path)
    try:
        return _parse(data, Path(path))
    except TraceError as exc:
        if exc.file is None:
            exc.file = str(path)
        raise


def _count(value: Any, what: str, limit: int = MAX_TENSOR_BYTES) -> int:
    """A count a trace records (elements, ranks): missing is 0, else an integer in [0, limit]."""
    if value is None:
        return 0
    if type(value) is not int or not 0 <= value <= limit:
        raise TraceError(f"{what} {_shown(value)} is not an integer in [0, {limit:,}]", field=what)
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_ID_KEYS = ("correlation", "External id")


def _checked_events(raw_events: list[Any]) -> list[dict[str, Any]]:
    """The complete ("X") events with a numeric start, each checked: ``ts`` finite, ``dur``
    (when given) a finite number of microseconds >= 0, ``pid`` / ``tid`` an integer or a
    string (they key the threads); a ``name`` that is not a string becomes one, ``args``
    that are not an object and ids that cannot key a lookup are dropped (they tie the event
    to nothing)."""
    events = []
    for pos, e in enumerate(raw_events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur, name = e.get("ts"), e.get("dur", 0), e.get("name", "")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            continue
        where = f"traceEvents[{pos}]"
        label = f"event {str(name)[:60]!r}"
        if not _finite(ts):
            raise TraceError(f"{label}: 'ts' {_shown(ts)} is not a finite time", field=f"{where}.ts")
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not _finite(dur) \
                or not 0 <= dur <= MAX_DURATION_US:
            raise TraceError(f"{label}: 'dur' {_shown(dur)} is not a duration in "
                             f"[0, {MAX_DURATION_US:g}] microseconds", field=f"{where}.dur")
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), (int, str, type(None))):
                raise TraceError(f"{label}: '{key}' {_shown(e[key])} is not an integer or a string",
                                 field=f"{where}.{key}")
        args = e.get("args")
        if not isinstance(e.get("name"), str):
            e = dict(e, name="" if name is None else str(name))
        if args is not None and (not isinstance(args, dict) or any(
                not isinstance(args.get(k), (int, str, type(None))) for k in _ID_KEYS)):
            e = dict(e, args={k: v for k, v in args.items() if k not in _ID_KEYS
                              or isinstance(v, (int, str))} if isinstance(args, dict) else {})
        events.append(e)
    return events


def _finite(x: int | float) -> bool:
    try:
        return math.isfinite(x) and abs(x) < 1e300
    except OverflowError:  # an integer beyond any float
        return False


def _parse(data: dict[str, Any], path: Path) -> KinetoTrace:
    events = _checked_events(data["traceEvents"])
    dist = data.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    world = dist.get("world_size")
    world = world if type(world) is int and world >= 1 else None
    rank = dist.get("rank") if type(dist.get("rank")) is int else None
    pgs = dist.get("pg_config")
    pg_sizes = {str(pg.get("pg_name")): _count(pg.get("pg_size"), "pg_size", MAX_WORLD_SIZE)
                for pg in (pgs if isinstance(pgs, list) else []) if isinstance(pg, dict)}
    devices = data.get("deviceProperties")
    devices = devices if isinstance(devices, list) else []
    kernels = [e for e in events if e.get("cat") == "kernel"]
    gpu_name = devices[0].get("name") if devices and isinstance(devices[0], dict) else None
    gpu_name = gpu_name if isinstance(gpu_name, str) else None
    trace = KinetoTrace(path=path.name, device=(gpu_name or "gpu") if kernels else "cpu",
                        world_size=world, rank=rank)

    steps = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    step_starts = [e["ts"] for e in steps]
    step_ids = []
    for e in steps:
        try:
            step_ids.append(int(str(e["name"]).split("#", 1)[1]))
        except ValueError:
            step_ids.append(len(step_ids))
    trace.steps = step_ids

    def step_of(t: float | None) -> int | None:
        if t is None or not steps:
            return None
        i = bisect_right(step_starts, t) - 1
        if i < 0:
            return None
        e = steps[i]
        return step_ids[i] if t <= e["ts"] + e.get("dur", 0) else None

    if kernels:
        _gpu_samples(trace, events, kernels, step_of, world, pg_sizes)
    else:
        _cpu_samples(trace, events, step_of, world, pg_sizes)
    if not trace.collectives:
        trace.notes.append(
            f"{trace.path}: no {'NCCL kernels' if kernels else 'gloo collectives'} in the trace; "
            "collectives use the analytical estimator")
    if not any(s.input_shapes for s in trace.compute):
        trace.notes.append(
            f"{trace.path}: no input shapes recorded (profile with record_shapes=True); compute "
            "ops cannot be matched to graph nodes and use the next estimator")
    return trace


def _group_size_default(world: int | None, pg_sizes: dict[str, int]) -> int | None:
    if len(pg_sizes) == 1:
        return next(iter(pg_sizes.values()))
    return world


def _gpu_samples(trace: KinetoTrace, events, kernels, step_of, world, pg_sizes) -> None:
    runtime = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                runtime[corr] = e
    cpu_by_ext: dict[Any, dict[str, Any]] = {}
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        ext = (e.get("args") or {}).get("External id")
        if ext is not None and e.get("cat") == "cpu_op":
            prev = cpu_by_ext.get(ext)
            if prev is None or e["ts"] >= prev["ts"]:  # the innermost op carrying this id
                cpu_by_ext[ext] = e
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)

    def direct_op(args):
        ext, corr = args.get("External id"), args.get("correlation")
        return cpu_by_ext.get(ext) if ext is not None and ext != corr else None

    # kernels that need the CPU events around their launch (older traces)
    queries: dict[tuple[Any, Any], list[float]] = {}
    for k in kernels:
        args = k.get("args") or {}
        launch = runtime.get(args.get("correlation"))
        if launch is None:
            continue
        is_nccl = str(k.get("name", "")).startswith(("ncclKernel_", "ncclDevKernel_"))
        if (is_nccl and "Collective name" not in args) or (not is_nccl and direct_op(args) is None):
            queries.setdefault((launch.get("pid"), launch.get("tid")), []).append(launch["ts"])
    stacks = {key: _enclosing_stacks(by_thread.get(key, []), times) for key, times in queries.items()}

    def stack_at(launch) -> list[dict[str, Any]]:
        if launch is None:
            return []
        return stacks.get((launch.get("pid"), launch.get("tid")), {}).get(launch["ts"], [])

    default_n = _group_size_default(world, pg_sizes)
    op_time: dict[int, list[Any]] = {}
    skipped = 0
    for k in kernels:
        args = k.get("args") or {}
        launch = runtime.get(args.get("correlation"))
        launch_t = launch["ts"] if launch is not None else None
        name = str(k.get("name", ""))
        dur = float(k.get("dur", 0.0))
        op = direct_op(args)
        if name.startswith(("ncclKernel_", "ncclDevKernel_")):
            trace.nccl_kernels += 1
            trace.nccl_spans.append((float(k["ts"]), float(k["ts"]) + dur))
            if launch_t is None and op is not None:
                launch_t = op["ts"]
            sample = _nccl_sample(args, stack_at(launch), default_n, dur, step_of(launch_t))
            if sample is None:
                skipped += 1
            else:
                trace.collectives.append(replace(sample, start_us=float(k["ts"]), stream=_stream(k)))
            continue
        trace.compute_kernel_us += dur
        trace.kernel_spans.append(KernelSpan(_kernel_key(name, args), float(k["ts"]), dur, _stream(k)))
        if op is None:
            op = next((e for e in stack_at(launch) if e.get("cat") == "cpu_op"), None)
        if op is None:
            continue
        trace.matched_kernel_us += dur
        slot = op_time.setdefault(id(op), [op, 0.0, 0, launch_t if launch_t is not None else op["ts"]])
        slot[1] += dur
        slot[2] += 1
    if skipped:
        trace.notes.append(f"{trace.path}: {skipped} NCCL kernel(s) without a known collective "
                           "or message size were skipped")
    for op, total, count, t in sorted(op_time.values(), key=lambda s: (s[3], s[0]["ts"])):
        shapes = _tensor_inputs(op.get("args") or {})
        trace.compute.append(ComputeSample(
            op=_op_name(str(op["name"])), input_shapes=shapes[0] if shapes else None,
            dtypes=shapes[1] if shapes else None, duration_us=total, kernels=count, step=step_of(t)))


def _stream(kernel: dict[str, Any]) -> int | str | None:
    """The stream a kernel ran on: ``args.stream``, else its ``tid`` (Kineto's stream lane)."""
    stream = (kernel.get("args") or {}).get("stream", kernel.get("tid"))
    return stream if isinstance(stream, (int, str)) and not isinstance(stream, bool) else None


def _kernel_key(name: str, args: dict[str, Any]) -> str:
    """A compute kernel's identity: its name with its grid and block (the same work)."""
    return f"{name} grid={args.get('grid')} block={args.get('block')}"


def _nccl_sample(args, stack, default_n, dur, step) -> CollectiveSample | None:
    coll = args.get("Collective name")
    if coll is not None and "In msg nelems" in args:
        ctype = collective_type(str(coll))
        dtype = trace_dtype(args.get("dtype")) or "float32"
        elems = max(_count(args.get("In msg nelems"), "In msg nelems"),
                    _count(args.get("Out msg nelems"), "Out msg nelems"))
        n = _count(args.get("Group size"), "Group size", MAX_WORLD_SIZE) or default_n or 0
        if ctype is None or n <= 0:
            return None
        return CollectiveSample(ctype, n, elems * _DTYPE_BYTES.get(dtype, 4), dur, step,
                                "kernel args", str(args.get("Process Group Name") or "") or None, dtype)
    # older traces: the CPU side that launched the kernel
    found = _from_cpu_stack(stack, default_n)
    if found is not None:
        ctype, n, size, dtype = found
        return CollectiveSample(ctype, n, size, dur, step, "cpu annotation", None, dtype)
    return None  # a kernel name alone gives no message size (and SendRecv no collective)


def _from_cpu_stack(stack, default_n) -> tuple[str, int, int, str | None] | None:
    """(type, group size, bytes, dtype) from the events around an NCCL launch, innermost first.

    ``record_param_comms`` with collective args wins. Otherwise the ``nccl:*`` annotation and
    the ``c10d::`` op name the collective; ``Input Dims`` give sizes: an op listing output and
    input (``c10d::_allgather_base_(out, in)``) gives the full message and, by their ratio,
    the group size; an input shard alone is multiplied by the group size for all_gather.
    """
    ctype = None
    pair: tuple[int, int, str] | None = None  # (largest, smallest, dtype of largest)
    single: tuple[int, str] | None = None
    for e in stack:
        name = str(e.get("name", ""))
        args = e.get("args") or {}
        if name == "record_param_comms" and args.get("Collective name") is not None:
            t = collective_type(str(args["Collective name"]))
            dt = trace_dtype(args.get("dtype")) or "float32"
            elems = max(_count(args.get("In msg nelems"), "In msg nelems"),
                        _count(args.get("Out msg nelems"), "Out msg nelems"))
            n = _count(args.get("Group size"), "Group size", MAX_WORLD_SIZE) or default_n or 0
            if t is not None and elems and n:
                return t, n, elems * _DTYPE_BYTES.get(dt, 4), dt
        t = collective_type(name) if name.startswith(("nccl:", "c10d::")) else None
        if t is None:
            continue
        ctype = ctype or t
        tensors = _tensor_inputs(args)
        if not tensors or not tensors[0]:
            continue
        sizes = [math.prod(sh) * _DTYPE_BYTES.get(d, 4) for sh, d in zip(*tensors, strict=True)]
        big = max(sizes)
        dt = tensors[1][sizes.index(big)]
        if len(sizes) >= 2 and pair is None:
            pair = (big, min(sizes), dt)
        elif single is None:
            single = (big, dt)
    if ctype is None:
        return None
    n = default_n or 0
    if pair is not None and pair[1] > 0:
        size, dtype = pair[0], pair[2]
        if ctype in ("all_gather", "reduce_scatter"):
            n = pair[0] // pair[1]
    elif single is not None:
        size, dtype = single
        if ctype == "all_gather":
            size *= n
    else:
        return None
    if not size or n <= 0:
        return None
    return ctype, int(n), int(size), dtype


def _cpu_samples(trace: KinetoTrace, events, step_of, world, pg_sizes) -> None:
    default_n = _group_size_default(world, pg_sizes)
    for e in sorted(events, key=lambda e: e["ts"]):
        name = str(e.get("name", ""))
        args = e.get("args") or {}
        dur = float(e.get("dur", 0.0))
        if e.get("cat") == "user_annotation" and name.startswith("gloo:"):
            ctype = collective_type(name)
            tensors = _tensor_inputs(args)
            if ctype is None or not tensors or not tensors[0] or not default_n:
                continue
            size = max(math.prod(s) * _DTYPE_BYTES.get(d, 4) for s, d in zip(*tensors, strict=True))
            if ctype == "all_gather":
                size *= default_n  # gloo records the input shard
            trace.collectives.append(CollectiveSample(ctype, default_n, size, dur, step_of(e["ts"]),
                                                      "cpu annotation", None, tensors[1][0],
                                                      start_us=float(e["ts"])))
        elif e.get("cat") == "cpu_op" and name.startswith("aten::"):
            tensors = _tensor_inputs(args)
            trace.compute_kernel_us += dur
            trace.matched_kernel_us += dur
            trace.compute.append(ComputeSample(
                op=_op_name(name), input_shapes=tensors[0] if tensors else None,
                dtypes=tensors[1] if tensors else None, duration_us=dur, kernels=0,
                step=step_of(e["ts"])))
