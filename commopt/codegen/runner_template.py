#!/usr/bin/env python3
# @@HEADER@@
"""Runner template: commopt replaces the marked sections with one graph's data and steps."""
# @@END HEADER@@

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import operator
import os
import statistics
import sys
import time
import types
from types import SimpleNamespace

import torch
import torch.distributed as dist

# The tables below are plain lists: no cycles for the cyclic collector to find, which would
# otherwise walk the growing tables again and again while they are parsed (a third of the
# import time of a 100k-node graph's runner). It resumes after STEPS.
_COLLECTOR_WAS_ON = gc.isenabled()
gc.disable()

# ====================================================================== graph data
# @@GRAPH DATA@@
GRAPH_NAME = "template"
WORLD_SIZE = 1
PLAN_DIGEST = ""
# Backend when --backend is not given (None: nccl with CUDA, else gloo).
DEFAULT_BACKEND = None
# Process groups in creation order: (variable, c10d name in the graph, size, rank sets or None
# for the whole world). A group defined along a mesh dimension lists every rank set of that
# dimension; each rank keeps the one it belongs to.
GROUPS = [("g_0_0", "0", 1, None)]
# Graph inputs: (node, name, dtype, local shape per rank, role, state-dict key or None).
INPUTS = json.loads(r'''[
    [0, "x", "float32", [[2, 2]], "user_input", null]
]''')
# One arena per process group: (group variable, bytes).
ARENAS = []
# Communication buffers: (variable, group variable, byte offset, dtype, shape).
BUFFERS = []
# Every operation the graph runs for real, resolved once at start-up: name -> overload.
OPS = {"aten_relu_default": "aten.relu.default"}
# Per iteration of the optimized order: tensors copied into buffers, and producers writing
# straight into them (zero-copy).
COPIES_PER_ITER = 0
ZERO_COPY_PER_ITER = 0
# Parameters living in the arena for good (flat-parameter layout): (buffer variable, input
# name). Copied in once when the inputs are loaded; all_gathers read them with no copy.
PERSISTENT_PARAMS = []
# Peak bytes one rank holds during the optimized step as commopt's memory model predicts it
# (arenas + inputs + every other live tensor; largest rank's sizes).
PREDICTED_PEAK_BYTES = 0
# @@END GRAPH DATA@@

# ====================================================================== runtime
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)

# Newer torch renames the tensor collectives; both spellings take (output, input, ...).
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
# The process group's own methods, newest spelling first: what the functions above call after
# their checks (see direct_issue).
GROUP_METHODS = {
    "all_gather": ("all_gather_single", "_allgather_base"),
    "reduce_scatter": ("reduce_scatter_single", "_reduce_scatter_base"),
    "all_reduce": ("allreduce",),
    "broadcast": ("broadcast",),
    "all_to_all": ("all_to_all_single", "alltoall_base"),
}


class RunnerError(RuntimeError):
    """A problem with the environment, the inputs or the ranks' agreement: one clear line."""


def log(rt, message: str) -> None:
    """Print a start-up or result line, once (rank 0), to stderr."""
    if rt.rank == 0:
        print(f"[{GRAPH_NAME}] {message}", file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options of the runner."""
    p = argparse.ArgumentParser(
        description=f"Run graph {GRAPH_NAME!r} in commopt's optimized order (start with torchrun).")
    p.add_argument("--iters", type=int, default=20, help="timed iterations (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations first (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--inputs", metavar="FILE.pt",
                   help="a torch.save'd dict input name (or state-dict key) -> tensor used "
                        "instead of random inputs; '{rank}' in the path is replaced by the rank "
                        "(one file per rank)")
    p.add_argument("--backend", choices=["nccl", "gloo"],
                   help="process-group backend (default: nccl with CUDA, else gloo)")
    p.add_argument("--gloo-threads", type=int, default=1, metavar="N",
                   help="worker threads of each gloo process group (default 1: a group's "
                        "collectives run one at a time in issue order, as on NCCL's one stream "
                        "per group; torch's default of 2 can corrupt the heap when several "
                        "collectives of a group are in flight); 0 keeps torch's default")
    p.add_argument("--buffers", choices=["auto", "registered", "symmetric", "plain"],
                   default="auto", help="how arenas are allocated on CUDA (default auto)")
    p.add_argument("--verify", action="store_true",
                   help="also run the original order and require identical outputs")
    p.add_argument("--compare", action="store_true",
                   help="also time the original order on fresh tensors and report the speed-up")
    p.add_argument("--profile", metavar="DIR", help="write a torch.profiler trace per rank")
    p.add_argument("--out", metavar="RESULTS.json", help="write timings (rank 0)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="capture the optimized step in a CUDA graph (CUDA only)")
    p.add_argument("--memory", action="store_true",
                   help="measure the live tensor bytes of one optimized step on each rank "
                        "(arenas plus every other storage) and print them next to commopt's "
                        "prediction")
    p.add_argument("--dump-outputs", metavar="FILE.pt",
                   help="torch.save the outputs of one optimized step ('{rank}' as for --inputs)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------- setup
def init_world(args) -> SimpleNamespace:
    """Read the world from torchrun's environment and initialize the default process group."""
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise RunnerError(f"{var} is not set: start this script with torchrun")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    owns_world = not dist.is_initialized()  # a caller may have initialized it (main(argv))
    if owns_world:
        backend = args.backend or DEFAULT_BACKEND or (
            "nccl" if torch.cuda.is_available() else "gloo")
    else:
        backend = str(dist.get_backend())
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise RunnerError("--backend nccl needs CUDA, which this machine does not have")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        if owns_world:
            dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        if owns_world:
            limit_gloo_threads(args.gloo_threads)
            dist.init_process_group("gloo")
    rt = SimpleNamespace(rank=rank, world=world, local_rank=local_rank, backend=backend,
                         device=device, buffer_mode="none", owns_world=owns_world, works={},
                         optimized=None, original=None)
    if WORLD_SIZE is not None and world != WORLD_SIZE:
        raise RunnerError(f"the graph was made for {WORLD_SIZE} ranks, this run has {world}: "
                          f"start it with --nproc-per-node/--nnodes giving {WORLD_SIZE}")
    threads = f", {gloo_threads()} worker thread(s) per group" if backend == "gloo" else ""
    log(rt, f"world: {world} ranks, backend {backend}, device {device.type}{threads}")
    return rt


def limit_gloo_threads(threads: int) -> None:
    """Make the gloo process groups created from now on run ``threads`` worker threads.

    torch gives each gloo group two by default, and two collectives of one group in flight at
    once (which a reordered step has) have corrupted the heap in torch 2.13's gloo. The
    thread count is a private option of ``ProcessGroupGloo``: where this torch lacks it, the
    default stays and the start-up line says how many threads the groups really have.
    """
    import torch.distributed.distributed_c10d as c10d

    base = getattr(c10d.ProcessGroupGloo, "commopt_base", c10d.ProcessGroupGloo)  # called again
    if threads <= 0 or not hasattr(base, "_Options") or not hasattr(base, "create_default_device"):
        return

    class GlooWithThreads(base):
        commopt_base = base

        def __init__(self, store, rank, size, timeout):
            options = base._Options()
            options._timeout = timeout
            options._threads = threads
            options._devices = [base.create_default_device()]
            super().__init__(store, rank, size, options)

    c10d.ProcessGroupGloo = GlooWithThreads


def gloo_threads() -> str:
    """How many worker threads the world's gloo backend runs, read back from the backend."""
    try:
        return str(dist.group.WORLD._get_backend(torch.device("cpu")).options._threads)
    except Exception:  # noqa: BLE001 - private API: say so rather than fail the run
        return "an unknown number of"


def create_groups(rt) -> None:
    """Create the graph's process groups, every rank in the same order, and keep this rank's."""
    rt.groups = SimpleNamespace()
    rt.group_sizes = {}
    renamed = []
    world_ranks = list(range(rt.world))
    for var, name, size, rank_sets in GROUPS:
        if rank_sets is None:
            rank_sets = [world_ranks]
        mine = None
        for ranks in rank_sets:
            if any(r >= rt.world for r in ranks):
                raise RunnerError(f"group {name!r} names rank {max(ranks)}, beyond the world")
            if ranks == world_ranks and name == dist.group.WORLD.group_name:
                pg = dist.group.WORLD
            else:
                pg = dist.new_group(ranks)
            if rt.rank in ranks:
                mine = pg
        if mine is None:
            raise RunnerError(f"rank {rt.rank} is in no rank set of group {name!r}: give the "
                              "graph its mesh or group ranks (commopt --mesh/--groups)")
        if mine.size() != size:
            raise RunnerError(f"group {name!r} has {mine.size()} ranks here, the graph says {size}")
        setattr(rt.groups, var, mine)
        rt.group_sizes[var] = size
        renamed.append(f"{name!r} -> {mine.group_name!r}")
    # Collectives get the group objects, so c10d names need not match the graph's; rank 0's
    # usually do when the groups were made in the same order as at export.
    log(rt, f"process groups (graph name -> this rank's c10d name): {', '.join(renamed)}")


def check_plan_digest(rt) -> None:
    """Stop unless every rank runs the same buffer plan (same digest and buffer tables)."""
    tables = repr((PLAN_DIGEST, ARENAS, BUFFERS)).encode()
    mine = f"{PLAN_DIGEST[:16] or 'no-plan'}/{hashlib.sha256(tables).hexdigest()[:16]}"
    every = [None] * rt.world
    dist.all_gather_object(every, mine)
    if len(set(every)) != 1:
        listing = ", ".join(f"rank {r}: {d}" for r, d in enumerate(every))
        raise RunnerError(f"buffer plan digest differs across ranks ({listing}): "
                          "every rank must run the same generated script")
    log(rt, f"buffer plan digest {mine} agreed by all ranks")


def allocate_arena(rt, group, size_bytes: int, mode: str) -> tuple[torch.Tensor, str]:
    """One arena's bytes: NCCL-registered, symmetric or plain, falling back in that order."""
    if rt.device.type != "cuda" or mode == "plain":
        return torch.empty(size_bytes, dtype=torch.uint8, device=rt.device), "plain"
    if mode in ("auto", "registered"):
        try:
            backend = group._get_backend(rt.device)
            pool = torch.cuda.MemPool(backend.mem_allocator)
            with torch.cuda.use_mem_pool(pool):
                arena = torch.empty(size_bytes, dtype=torch.uint8, device=rt.device)
            backend.register_mem_pool(pool)
            rt.pools.append(pool)
            return arena, "registered"
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the next mode
            rt.fallback_reasons.append(f"NCCL registration unavailable ({exc})")
    if mode in ("auto", "symmetric"):
        try:
            from torch.distributed import _symmetric_memory as symm_mem

            arena = symm_mem.empty(size_bytes, dtype=torch.uint8, device=rt.device)
            symm_mem.rendezvous(arena, group)
            return arena, "symmetric"
        except Exception as exc:  # noqa: BLE001 - any failure falls back to plain memory
            rt.fallback_reasons.append(f"symmetric memory unavailable ({exc})")
    return torch.empty(size_bytes, dtype=torch.uint8, device=rt.device), "plain"


def allocate_buffers(rt, mode: str) -> None:
    """Allocate every arena and precompute every buffer's view at its fixed offset."""
    rt.pools, rt.fallback_reasons = [], []
    arenas, modes = {}, set()
    for group_var, size_bytes in ARENAS:
        arenas[group_var], used = allocate_arena(rt, getattr(rt.groups, group_var),
                                                 size_bytes, mode)
        modes.add(used)
    rt.arenas = arenas
    rt.views = SimpleNamespace()
    for var, group_var, offset, dtype, shape in BUFFERS:
        nbytes = torch.empty((), dtype=DTYPES[dtype]).element_size()
        for d in shape:
            nbytes *= d
        raw = arenas[group_var][offset:offset + nbytes]
        setattr(rt.views, var, raw.view(DTYPES[dtype]).view(shape))
    rt.buffer_mode = "+".join(sorted(modes)) if modes else "none"
    total = sum(size for _, size in ARENAS)
    for reason in dict.fromkeys(rt.fallback_reasons):
        log(rt, f"note: {reason}")
    log(rt, f"buffers: {len(BUFFERS)} in {len(ARENAS)} arena(s), {total} bytes, "
            f"mode {rt.buffer_mode}; {COPIES_PER_ITER} copies remain per iteration, "
            f"{ZERO_COPY_PER_ITER} producers write in place")


#: Overloads whose torch Python binding calls exactly that overload with the same positional
#: arguments, through torch's generated argument parser: 0.3-1.5 us less host time per call
#: than the overload's generic entry point (measured on CPU, inference mode). Used for calls
#: with positional arguments only (the bindings name ``self`` ``input``); the same kernel
#: runs, so results are the same. Shape and view operations, the most frequent in a step.
FAST_BINDINGS = {
    "aten.view.default": torch.Tensor.view,
    "aten.t.default": torch.Tensor.t,
    "aten.transpose.int": torch.Tensor.transpose,
    "aten.unsqueeze.default": torch.Tensor.unsqueeze,
    "aten.detach.default": torch.Tensor.detach,
    "aten.expand.default": torch.Tensor.expand,
    "aten.mm.default": torch.mm,
}


def resolve_ops(rt) -> None:
    """Look every operation up once: torch.ops.<namespace>.<op>.<overload>. The program calls
    the overload's C++ entry point (``_op``), which is what calling the overload does, or its
    Python binding where :data:`FAST_BINDINGS` has one (``rt.fast_ops``)."""
    rt.ops = {}
    rt.fast_ops = {name: FAST_BINDINGS[qualified] for name, qualified in OPS.items()
                   if qualified in FAST_BINDINGS}
    for name, qualified in OPS.items():
        target = torch.ops
        try:
            for part in qualified.split("."):
                target = getattr(target, part)
        except (AttributeError, RuntimeError):
            raise RunnerError(f"operation {qualified!r} is not in this torch "
                              f"({torch.__version__})") from None
        if not isinstance(target, torch._ops.OpOverload):
            raise RunnerError(f"{qualified!r} is not an operator overload")
        rt.ops[name] = getattr(target, "_op", target)


def make_emulated(rt) -> None:
    """Outputs of emulated nodes (``'emulated'`` steps), allocated once, and the busy wait
    standing in for them."""
    rt.emulated = {}
    for node, _name, kind, _reads, *rest in STEPS:
        if kind != "emulated":
            continue
        _duration_us, outputs, fill = rest
        values = []
        for dtype, shape in outputs:
            dt = DTYPES[dtype]
            value = fill if dt.is_floating_point or dt.is_complex else round(fill * 8)
            values.append(torch.full(shape, value, dtype=dt, device=rt.device))
        rt.emulated[node] = values[0] if len(values) == 1 else tuple(values) or None
    if rt.device.type == "cuda":
        props = torch.cuda.get_device_properties(rt.device)
        cycles_per_us = getattr(props, "clock_rate", 1_500_000) / 1000.0

        def emulate(duration_us: float) -> None:
            torch.cuda._sleep(int(duration_us * cycles_per_us))
    else:
        def emulate(duration_us: float) -> None:
            end = time.perf_counter() + duration_us * 1e-6
            while time.perf_counter() < end:
                pass
    rt.emulate = emulate
    if rt.emulated:
        log(rt, f"{len(rt.emulated)} node(s) emulated by a timed busy wait")


def make_inputs(rt, args) -> dict:
    """This rank's inputs: loaded from --inputs, else random with its own local shapes."""
    if args.inputs:
        path = args.inputs.replace("{rank}", str(rt.rank))
        loaded = torch.load(path, map_location=rt.device, weights_only=True)
        if not isinstance(loaded, dict):
            raise RunnerError(f"{path}: expected a dict name -> tensor")
        values = {}
        for _var, name, dtype, shapes, _role, key in INPUTS:
            value = loaded.get(name, loaded.get(key) if key is not None else None)
            if not isinstance(value, torch.Tensor):
                raise RunnerError(f"{path}: no tensor for input {name!r}"
                                  + (f" (or {key!r})" if key is not None else ""))
            if value.dtype != DTYPES[dtype] or value.dim() != len(shapes[0]):
                raise RunnerError(f"{path}: input {name!r} is {value.dtype} of shape "
                                  f"{list(value.shape)}, the graph says {dtype} {shapes[0]}")
            values[name] = value.to(rt.device)
        return values
    gen = torch.Generator(device="cpu").manual_seed(args.seed * 1_000_003 + rt.rank)
    values = {}
    for _var, name, dtype, shapes, role, _key in INPUTS:
        shape = shapes[rt.rank] if len(shapes) > 1 else shapes[0]
        dt = DTYPES[dtype]
        if dt.is_floating_point or dt.is_complex:
            # parameters at a typical init scale, so deep graphs stay finite
            scale = 0.02 if role == "parameter" else 1.0
            value = (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(dt)
        elif dt == torch.bool:
            value = torch.rand(shape, generator=gen) < 0.5
        else:
            value = torch.randint(0, 2, shape, generator=gen).to(dt)
        values[name] = value.to(rt.device)
    return values


def place_persistent_params(rt, inputs: dict) -> None:
    """Copy each persistent parameter into its arena slot, once, and hold it only there: the
    step reads ``inputs[name]`` (now a view of the slot), and its all_gathers read the slot
    without a copy. Nothing in the step writes these parameters (commopt checked it)."""
    for var, name in PERSISTENT_PARAMS:
        slot, value = getattr(rt.views, var), inputs[name]
        if value.shape != slot.shape or value.dtype != slot.dtype:
            raise RunnerError(f"input {name!r} is {value.dtype} of shape {list(value.shape)}, its "
                              f"arena slot {slot.dtype} {list(slot.shape)}")
        slot.copy_(value)
        inputs[name] = slot
    if PERSISTENT_PARAMS:
        log(rt, f"{len(PERSISTENT_PARAMS)} parameter(s) placed in the arena once; they are not "
                "copied per step")


# ====================================================================== steps
# STEPS holds one record per node, in the graph's order (record k is node k), found by the
# node's name; OPTIMIZED_ORDER lists the node indices in commopt's order. Both are JSON (read
# in a fraction of the time Python parses the same literal). Every record starts
# [node, name, kind, reads]: `reads` are the nodes whose values it needs -- each value is
# dropped after its last reader in the order being run (as `del` would), except the outputs.
# Inside arguments every JSON object has one key: {"v": k} is node k's value; {"dtype":
# "float32"}, {"device": null}, {"layout": ...}, {"memory_format": ...}, {"tuple": [...]},
# {"dict": {...}} and {"float": "nan"} are values JSON cannot spell; anything else is itself.
# The kinds and their remaining fields:
#   input       -                         the input of that name (--inputs, or random)
#   op          op, args, kwargs[, into]  OPS[op](*args, **kwargs); `into` (optimized order):
#               ("out", buffer, out_op) calls the .out overload writing into its buffer,
#               ("copy_", buffer) casts by copying into it (zero-copy producers); a shape
#               after them: the buffer is written as that shape (the collective sends a
#               view of this result that keeps its bytes in order)
#   getitem     value, index              value[index]
#   scalar      function, args            SCALARS[function](*args): size arithmetic
#   reshape     value, shape              a view without a call: value.reshape(shape)
#   emulated    us, outputs, fill         busy-wait us microseconds; outputs filled once
#   collective  type, group, reduce_op, coalesced, tensors, extra
#               launched asynchronously; one (source, source shape, input buffer, how,
#               output buffer, dtype, shape) per tensor. In the optimized order `how` says
#               how the input reaches its buffer: "copy" (copied in), "written" (its
#               producer wrote there), "shared" (another collective copied it this step),
#               "persistent" (a parameter living there), "in_place"; a shape None is sized
#               when the step runs (data-dependent). The original order uses fresh tensors.
#               extra: broadcast [root rank in group], all_to_all [out splits, in splits]
#   wait        collective, value         waits for the collective (its first wait), gives value
#   output      values                    the step's outputs
# @@STEPS@@
STEPS = json.loads(r'''[
    [0, "x", "input", []],
    [1, "y", "op", [0], "aten_relu_default", [{"v": 0}], {}],
    [2, "output", "output", [1], [{"v": 1}]]
]''')
# commopt's order: node indices (records of STEPS), run on the arenas.
OPTIMIZED_ORDER = json.loads(r'''[
    0, 1, 2
]''')
# @@END STEPS@@
if _COLLECTOR_WAS_ON:
    gc.enable()

# ====================================================================== the step program
# build_program turns STEPS, for one order, into a flat list of entries
#     (call, slots, kwargs, out, frees)
# compiled once into straight-line functions that run_program calls, one statement an entry:
# env[out] = call(*[env[s] for s in slots], **kwargs), then env[j] = None for j in frees.
# `env` holds one slot per node (its value), then constants and
# temporaries (nested argument lists, built by their own entry just before their reader).
# Everything else is decided once, here: ops resolved, buffer views and copies chosen,
# constants decoded, each value's last reader found.
SCALARS = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "floordiv", "mod", "truediv", "pow", "ge", "gt", "le", "lt", "eq",
    "ne", "and_", "or_", "xor", "lshift", "rshift", "neg", "pos", "not_", "abs", "invert")}
SCALARS.update(max=max, min=min, float=float, int=int, sum=sum)


def pack_list(*values):
    return list(values)


def pack_tuple(*values):
    return values


class Program:
    """One order of STEPS made ready to run (see :func:`build_program`)."""

    def __init__(self, rt, on_arenas: bool) -> None:
        self.rt = rt  # while building only: see build_program
        self.works = rt.works  # node -> Work handles of collectives in flight
        self.on_arenas = on_arenas
        self.base = [None] * len(STEPS)  # node slots, then constants and temporaries
        self.entries = []
        self.entry_of = {}  # node -> index of the entry computing its value
        self.inputs = []  # (node, input name)
        self.output = None
        self.parts = []  # the entries compiled to straight-line functions (compile_entries)

    def constant(self, value) -> int:
        self.base.append(value)
        return len(self.base) - 1

    def decode(self, value):
        """A constant argument as the value it stands for (no references inside)."""
        if isinstance(value, dict):
            (tag, inner), = value.items()
            if tag == "dtype":
                return DTYPES[inner]
            if tag == "device":
                return self.rt.device
            if tag in ("layout", "memory_format"):
                return getattr(torch, inner)
            if tag == "tuple":
                return tuple(self.decode(v) for v in inner)
            if tag == "dict":
                return {k: self.decode(v) for k, v in inner.items()}
            if tag == "float":
                return float(inner)
            raise RunnerError(f"unknown argument tag {tag!r}")
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        return value

    def slot(self, value, temps: list) -> int:
        """The env slot holding an argument: a node's, a constant's, or a temporary built by
        an entry added now (its slot appended to ``temps``, freed after the reader)."""
        if isinstance(value, dict) and "v" in value:
            return value["v"]
        if not has_reference(value):
            return self.constant(self.decode(value))
        if isinstance(value, list):
            call, items = pack_list, value
        elif "tuple" in value:
            call, items = pack_tuple, value["tuple"]
        else:  # {"dict": {...}}
            names = tuple(value["dict"])
            call, items = (lambda *v: dict(zip(names, v, strict=True))), list(value["dict"].values())
        slots = [self.slot(v, temps) for v in items]
        out = self.constant(None)
        self.entries.append((call, slots, None, out, ()))
        temps.append(out)
        return out

    def add(self, node, call, args, kwargs=None, fixed=None) -> None:
        """An entry computing node's value: ``call(*args, **kwargs, **fixed)`` on encoded
        arguments (``fixed``: keyword values already made, such as an ``out=`` buffer)."""
        temps = []
        slots = [self.slot(a, temps) for a in args]
        fixed = fixed or {}
        if kwargs and has_reference(list(kwargs.values())):  # keyword values computed by the step
            names, positional, fn = tuple(kwargs), len(slots), call
            slots += [self.slot(v, temps) for v in kwargs.values()]

            def call(*v):
                return fn(*v[:positional], **dict(zip(names, v[positional:], strict=True)), **fixed)

            kwargs = None
        else:
            kwargs = {**{k: self.decode(v) for k, v in (kwargs or {}).items()}, **fixed} or None
        self.entry_of[node] = len(self.entries)
        self.entries.append((call, slots, kwargs, node, temps))


def has_reference(value) -> bool:
    """Whether an encoded argument contains a node's value."""
    if isinstance(value, dict):
        return "v" in value or ("tuple" in value and has_reference(value["tuple"])) or (
            "dict" in value and has_reference(list(value["dict"].values())))
    if isinstance(value, list):
        return any(has_reference(v) for v in value)
    return False


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while set-up builds long-lived objects: it would walk
    them again and again (about half the build time at 100k nodes). Not frozen after: an
    object frozen in a cycle would never be freed, and a process group kept alive to the
    interpreter's exit makes gloo abort."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def build_program(rt, order, on_arenas: bool) -> Program:
    """``order`` (node indices) of STEPS as a program: on the arenas (the optimized order's
    buffers, copies and zero-copy producers) or on fresh tensors (the reference)."""
    with collector_paused():
        return _build_program(rt, order, on_arenas)


def _build_program(rt, order, on_arenas: bool) -> Program:
    """:func:`build_program` with the collector paused."""
    program = Program(rt, on_arenas)
    for i in order:
        record = STEPS[i]
        node, kind = record[0], record[2]
        if node != i:
            raise RunnerError(f"STEPS record {i} is for node {node}: the table is out of order")
        if kind == "input":
            program.inputs.append((node, record[1]))
        elif kind == "output":
            program.add(node, pack_list, record[4])
            program.output = node
        elif kind in STEP_KINDS:
            STEP_KINDS[kind](program, record)
        else:
            raise RunnerError(f"node {record[1]!r}: unknown step kind {kind!r}")
    free_after_last_use(program, order)
    # No reference back to rt: a cycle would keep the process groups alive past
    # destroy_process_group until the interpreter exits, where gloo aborts ("terminate called
    # without an active exception"; seen in 4 of about 20 two-rank runs before this line).
    program.rt = None
    program.parts = compile_entries(program.entries)
    return program


#: Entries per compiled function: bounds the size of one code object (compiling a very long
#: function costs more than several short ones), each part is one more call per step.
ENTRIES_PER_PART = 2000


def compile_entries(entries) -> list:
    """The entries as straight-line Python functions ``part(env)``, each running up to
    :data:`ENTRIES_PER_PART` of them in order. Each entry becomes one statement,
    ``env[out] = c12(env[3], env[7], **k12)``, then ``env[j] = None`` for its frees: the same
    calls in the same order as a loop over the entries, without the loop's unpacking and
    argument mapping on every entry and step: about 2 us less host time per entry and step
    (measured on gloo with tiny tensors), for 10-30 us per entry compiled once at set-up."""
    parts = []
    for start in range(0, len(entries), ENTRIES_PER_PART):
        namespace, lines = {"__builtins__": __builtins__}, ["def part(env):"]
        for k, (call, slots, kwargs, out, frees) in enumerate(entries[start:start + ENTRIES_PER_PART]):
            namespace[f"c{k}"] = call
            args = ", ".join(f"env[{s}]" for s in slots)
            if kwargs is not None:
                namespace[f"k{k}"] = kwargs
                args = f"{args}, **k{k}" if args else f"**k{k}"
            lines.append(f"    env[{out}] = c{k}({args})")
            lines.extend(f"    env[{j}] = None" for j in frees)
        lines.append("    return None")
        module = compile("\n".join(lines) + "\n", f"<commopt step part {len(parts)}>", "exec")
        body = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        parts.append(types.FunctionType(body, namespace))
    return parts


def free_after_last_use(program: Program, order) -> None:
    """Add to each entry the node values last read there (values nobody reads: their own
    entry), so a step holds a tensor no longer than the straight-line program would. The
    outputs are kept."""
    last = {}
    for i in order:
        for j in STEPS[i][3]:
            last[j] = i
    for j in program.entry_of:
        last.setdefault(j, j)
    frees = {}
    for j, reader in last.items():
        if reader in program.entry_of and reader != program.output:
            frees.setdefault(program.entry_of[reader], []).append(j)
    for k, extra in frees.items():
        call, slots, kwargs, out, temps = program.entries[k]
        program.entries[k] = (call, slots, kwargs, out, (*temps, *sorted(extra)))


def run_program(program: Program, inputs: dict):
    """Run one step: the hot loop, launches only. Returns the step's outputs.

    The graph is already the whole step (an exported backward is explicit ops), so nothing
    needs autograd: inference mode skips its bookkeeping on every op (about 10% of the host
    time per step on the corpus graphs) and computes the same values."""
    env = program.base.copy()
    for node, name in program.inputs:
        env[node] = inputs[name]
    program.works.clear()
    with torch.inference_mode():
        for part in program.parts:
            part(env)
    return env[program.output] if program.output is not None else []


def run_optimized(rt, inputs):
    """One step in commopt's optimized order, on the arenas."""
    if rt.optimized is None:
        rt.optimized = build_program(rt, OPTIMIZED_ORDER, on_arenas=True)
    return run_program(rt.optimized, inputs)


def run_original(rt, inputs):
    """One step in the graph's original order on fresh tensors: the reference for --verify."""
    if rt.original is None:
        rt.original = build_program(rt, range(len(STEPS)), on_arenas=False)
    return run_program(rt.original, inputs)


# ---------------------------------------------------------------------- step kinds
def add_op(program: Program, record) -> None:
    node, _name, _kind, _reads, op, args, kwargs, *into = record
    rt = program.rt
    if into and program.on_arenas:
        how, buffer, *rest = into[0]
        view = getattr(rt.views, buffer)
        if how == "copy_":  # a dtype cast: the copy into the buffer casts
            shape = rest[0] if rest else None
        else:
            out_op, shape = rest[0], (rest[1] if len(rest) > 1 else None)
        if shape is not None:  # the collective sends a view of this result: same bytes
            view = view.view(shape)
        if how == "copy_":
            program.add(node, view.copy_, args[:1])
        else:
            program.add(node, rt.ops[out_op], args, kwargs, fixed={"out": view})
        return
    call = rt.fast_ops.get(op) if not kwargs else None  # positional only: see FAST_BINDINGS
    program.add(node, call or rt.ops[op], args, kwargs)


def add_getitem(program: Program, record) -> None:
    program.add(record[0], operator.getitem, [record[4], record[5]])


def add_scalar(program: Program, record) -> None:
    program.add(record[0], SCALARS[record[4]], record[5])


def add_reshape(program: Program, record) -> None:
    program.add(record[0], torch.Tensor.reshape, [record[4], record[5]])


def add_emulated(program: Program, record) -> None:
    node, duration_us = record[0], record[4]
    emulate, value = program.rt.emulate, program.rt.emulated[node]

    def emulated():
        emulate(duration_us)
        return value

    program.add(node, emulated, [])


def add_wait(program: Program, record) -> None:
    node, _name, _kind, _reads, coll, value = record
    if coll is None:
        program.add(node, lambda v: v, [value])
        return
    _c, _n, _k, _r, _type, group_var, reduce_op, coalesced, *_rest = STEPS[coll]
    works = program.works
    divisor = program.rt.group_sizes[group_var] if reduce_op == "AVG" else None

    def wait(collective_value, value):
        handles = works.pop(coll, None)
        if handles is not None:  # the collective's first wait
            for work in handles:
                work.wait()
            if divisor is not None:  # avg: summed, divided here
                for v in collective_value if coalesced else (collective_value,):
                    v.div_(divisor)
        return value

    program.add(node, wait, [{"v": coll}, value])


def add_collective(program: Program, record) -> None:
    node, _name, _kind, _reads, ctype, group_var, reduce_op, coalesced, tensors, extra = record
    rt = program.rt
    group, works = getattr(rt.groups, group_var), program.works
    if ctype == "barrier":
        def barrier():
            works[node] = [dist.barrier(group=group, async_op=True)]

        program.add(node, barrier, [])
        return
    launchers = [tensor_launcher(program, ctype, group_var, reduce_op, t) for t in tensors]
    n = len(launchers)
    if n == 1 and not coalesced:  # the usual case, without the loop and lists below
        launch = launchers[0]

        def issue_one(src, *extra_values):
            work, out = launch(src, extra_values)
            works[node] = [work]
            return out

        program.add(node, issue_one, [{"v": tensors[0][0]}, *extra])
        return

    def issue(*values):
        extra_values, handles, outs = values[n:], [], []
        for launch, src in zip(launchers, values[:n], strict=True):
            work, out = launch(src, extra_values)
            handles.append(work)
            outs.append(out)
        works[node] = handles
        return outs if coalesced else outs[0]

    program.add(node, issue, [*({"v": t[0]} for t in tensors), *extra])


def tensor_launcher(program: Program, ctype, group_var, reduce_op, tensor):
    """``launch(source, extra) -> (work, output)`` for one tensor of a collective."""
    _src, src_shape, in_buffer, how, out_buffer, dtype, shape = tensor
    rt = program.rt
    group, size = getattr(rt.groups, group_var), rt.group_sizes[group_var]
    device, dt = rt.device, DTYPES[dtype]
    op = getattr(dist.ReduceOp, "SUM" if reduce_op in (None, "AVG") else reduce_op)
    on_buffer = program.on_arenas and in_buffer is not None and how != "in_place"
    view = getattr(rt.views, in_buffer) if on_buffer else None
    if view is not None and list(view.shape) != list(src_shape):
        view = view.view(src_shape)
    copy_in = on_buffer and how == "copy"
    out_view = getattr(rt.views, out_buffer) if program.on_arenas and out_buffer else None

    def sent(src):
        if how == "in_place":
            return src
        if view is None:
            return src.clone() if ctype in ("all_reduce", "broadcast") else src.contiguous()
        if copy_in:
            view.copy_(src)
        return view

    def received(src, sent_tensor, extra):
        if ctype in ("all_reduce", "broadcast") or how == "in_place":
            return sent_tensor
        if out_view is not None:
            return out_view
        return torch.empty(shape if shape is not None else runtime_shape(ctype, src, size, extra),
                           dtype=dt, device=device)

    issue = direct_issue(ctype, group, op, dt)
    if issue is not None and view is not None:
        # Both tensors fixed (the arena's): what sent and received below return, decided now
        out = view if ctype in ("all_reduce", "broadcast") else out_view
        if out is not None:
            if copy_in:
                def launch_copied(src, extra):
                    view.copy_(src)
                    return issue(out, view, extra), out

                return launch_copied

            def launch_placed(src, extra):
                return issue(out, view, extra), out

            return launch_placed

    def launch(src, extra):
        inp = sent(src)
        out = received(src, inp, extra)
        if issue is not None:
            return issue(out, inp, extra), out
        if ctype == "all_reduce":
            return dist.all_reduce(out, op=op, group=group, async_op=True), out
        if ctype == "broadcast":
            return dist.broadcast(out, group_src=extra[0], group=group, async_op=True), out
        if ctype == "all_gather":
            return ALL_GATHER(out, inp, group=group, async_op=True), out
        if ctype == "reduce_scatter":
            return REDUCE_SCATTER(out, inp, op=op, group=group, async_op=True), out
        return dist.all_to_all_single(out, inp, extra[0], extra[1], group=group,
                                      async_op=True), out

    return launch


def direct_issue(ctype, group, op, dtype):
    """``issue(out, inp, extra) -> Work``: the collective launched by the process group's own
    method, as the torch.distributed function does after its argument checks, which cost
    20-50 us per call on the host (measured on gloo: reduce_scatter 115-160 -> 68-70 us with
    its wait). None where that function does more than check (complex tensors travel as
    view_as_real, fp8 broadcasts as bytes on older GPUs) or this torch's group lacks the
    method: the function is called then."""
    if dtype.is_complex or (ctype == "broadcast" and dtype.itemsize == 1 and dtype.is_floating_point):
        return None
    method = next((getattr(group, name) for name in GROUP_METHODS.get(ctype, ())
                   if hasattr(group, name)), None)
    if method is None:
        return None
    c10d = torch._C._distributed_c10d

    def options(kind, **fields):
        opts = getattr(c10d, kind)()
        for name, value in {"asyncOp": True, **fields}.items():
            if hasattr(opts, name):
                setattr(opts, name, value)
        return opts

    # The options are built once: the backend copies them on each call (building them took
    # ~15 us per collective on the host, as much as launching it on gloo).
    if ctype == "all_gather":
        gather = options("AllgatherOptions")
        return lambda out, inp, extra: method(out, inp, gather)
    if ctype == "reduce_scatter":
        scatter = options("ReduceScatterOptions", reduceOp=op)
        return lambda out, inp, extra: method(out, inp, scatter)
    if ctype == "all_reduce":
        reduce = options("AllreduceOptions", reduceOp=op)
        return lambda out, inp, extra: method([out], reduce)
    if ctype == "broadcast":
        by_root = {}

        def broadcast(out, inp, extra):
            root = extra[0]
            if root not in by_root:
                by_root[root] = options("BroadcastOptions", rootRank=root, rootTensor=0)
            return method([out], by_root[root])

        return broadcast
    exchange = options("AllToAllOptions")
    return lambda out, inp, extra: method(out, inp, [] if extra[0] is None else extra[0],
                                          [] if extra[1] is None else extra[1], exchange)


def runtime_shape(ctype, src, size, extra) -> list:
    """A collective's output shape when it depends on the step's values (data-dependent split
    sizes): from the tensor it sends and its split sizes, never from an assumed size."""
    if ctype == "all_to_all":
        return [sum(extra[0]), *src.shape[1:]] if extra[0] is not None else list(src.shape)
    if ctype == "all_gather":
        return [src.shape[0] * size, *src.shape[1:]]
    return [src.shape[0] // size, *src.shape[1:]]


STEP_KINDS = {"op": add_op, "getitem": add_getitem, "scalar": add_scalar,
              "reshape": add_reshape, "emulated": add_emulated, "wait": add_wait,
              "collective": add_collective}


# ====================================================================== execution
def fresh_inputs(inputs: dict) -> dict:
    """Copies of the inputs, so in-place updates in one run do not leak into the next. The
    persistent parameters stay where they live, in the arena (no step writes them)."""
    keep = {name for _, name in PERSISTENT_PARAMS}
    return {k: v.clone() if isinstance(v, torch.Tensor) and k not in keep else v
            for k, v in inputs.items()}


def snapshot(values) -> list:
    """Outputs, nested lists flattened, copied out of the arenas (the next step overwrites them)."""
    flat = []
    for v in values:
        if isinstance(v, (list, tuple)):
            flat.extend(snapshot(v))
        else:
            flat.append(v.detach().clone() if isinstance(v, torch.Tensor) else v)
    return flat


def identical(a, b) -> bool:
    """Whether two outputs are the same: tensors bit for bit (NaN where the other has NaN)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) and a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def same_outputs(a: list, b: list) -> list[int]:
    """Positions where two output lists differ."""
    bad = [i for i in range(min(len(a), len(b))) if not identical(a[i], b[i])]
    return bad + list(range(min(len(a), len(b)), max(len(a), len(b))))


def verify(rt, inputs, args) -> None:
    """Run the optimized and the original order on the same inputs; outputs must be equal."""
    torch.manual_seed(args.seed)
    got = snapshot(run_optimized(rt, fresh_inputs(inputs)))
    torch.manual_seed(args.seed)
    want = snapshot(run_original(rt, fresh_inputs(inputs)))
    bad = same_outputs(got, want)
    every = [None] * rt.world
    dist.all_gather_object(every, bad)
    failed = {r: b for r, b in enumerate(every) if b}
    if failed:
        raise RunnerError(f"verify failed: outputs differ from the original order at {failed} "
                          "(rank: output positions)")
    log(rt, f"verify: {len(got)} output(s) identical to the original order on every rank")


def time_iterations(rt, inputs, args) -> tuple[list[float], list[float] | None]:
    """Warm up, then time each iteration (CUDA events on GPU, perf_counter on CPU).

    With --compare the original order is timed too, alternating iteration by iteration so
    both see the same machine load. Returns (optimized, original or None) times in us.
    """
    steps = [lambda: run_optimized(rt, inputs)]
    if args.compare:
        steps.append(lambda: run_original(rt, inputs))
    for _ in range(args.warmup):
        for step in steps:
            step()
    if args.cuda_graph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            steps[0]()
        steps[0] = graph.replay
    times_us: list[list[float]] = [[] for _ in steps]
    rt.host_cpu_us = []  # this thread's CPU time per optimized step: the host's share
    if rt.device.type == "cuda":
        torch.cuda.synchronize()
        events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                   for _ in range(args.iters)] for _ in steps]
        for k in range(args.iters):
            for j, (step, pairs) in enumerate(zip(steps, events, strict=True)):
                c0 = time.thread_time()
                pairs[k][0].record()
                step()
                pairs[k][1].record()
                if j == 0:
                    rt.host_cpu_us.append((time.thread_time() - c0) * 1e6)
        torch.cuda.synchronize()
        times_us = [[start.elapsed_time(end) * 1000.0 for start, end in pairs] for pairs in events]
    else:
        for _ in range(args.iters):
            for k, (step, out) in enumerate(zip(steps, times_us, strict=True)):
                t0, c0 = time.perf_counter(), time.thread_time()
                step()
                out.append((time.perf_counter() - t0) * 1e6)
                if k == 0:
                    rt.host_cpu_us.append((time.thread_time() - c0) * 1e6)
    return times_us[0], (times_us[1] if args.compare else None)


def profile_iterations(rt, inputs, args) -> None:
    """Record a torch.profiler trace of a few iterations into --profile DIR (one file per rank)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if rt.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as prof:  # commopt calibrate matches shapes
        for _ in range(max(1, min(args.iters, 5))):
            run_optimized(rt, inputs)
        if rt.device.type == "cuda":
            torch.cuda.synchronize()
    os.makedirs(args.profile, exist_ok=True)
    prof.export_chrome_trace(os.path.join(args.profile, f"trace_rank{rt.rank}.json"))
    log(rt, f"profiler traces written to {args.profile}")


class LiveStorages:
    """Counts the bytes of storages alive while it is active, and their peak.

    Every operator output is seen through a dispatch mode; each new storage (by data
    pointer) is counted until it is freed, which a weak reference to the storage tells
    (checked before every operator, so a storage freed by a ``del`` drops out before the
    next operator allocates). Storages that exist when the mode starts (the inputs, the
    arenas) are the ``base``: counted from the start, never freed. Works on CPU and CUDA.

    A storage first seen as both an input and an output of one operator was allocated
    where the mode cannot see: by the backend on its own thread (gloo stages a
    reduce_scatter's input in a buffer of its own, then splits it when the work is waited
    on). Those are the backend's, not the program's: counted apart (``backend_peak``),
    not in ``peak``, which is what commopt's memory model predicts.
    """

    def __init__(self, base: list) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        self._ref = StorageWeakRef
        self.known = {}
        for t in base:
            st = t.untyped_storage()
            self.known.setdefault(st.data_ptr(), (None, st.nbytes()))
        self.base = self.live = self.peak = sum(n for _, n in self.known.values())
        self.backend = {}  # data pointer -> (weak ref, bytes) of storages the backend made
        self.backend_live = self.backend_peak = 0

    def mode(self):
        """A TorchDispatchMode that records every output while it is entered."""
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.sweep()
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        counter.add(t, (args, kwargs))
                return out

        return _Mode()

    def add(self, t, op_inputs) -> None:
        """Count ``t``'s storage if it is new (``op_inputs``: the operator's arguments)."""
        from torch.utils._pytree import tree_leaves

        st = t.untyped_storage()
        key = st.data_ptr()
        if st.nbytes() == 0 or key in self.known or key in self.backend:
            return
        if any(isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == key
               for a in tree_leaves(op_inputs)):
            self.backend[key] = (self._ref(st), st.nbytes())
            self.backend_live += st.nbytes()
            self.backend_peak = max(self.backend_peak, self.backend_live)
            return
        self.known[key] = (self._ref(st), st.nbytes())
        self.live += st.nbytes()
        self.peak = max(self.peak, self.live)

    def sweep(self) -> None:
        """Drop the storages that were freed since the last operator."""
        gone = [k for k, (ref, _) in self.known.items() if ref is not None and ref.expired()]
        for k in gone:
            self.live -= self.known.pop(k)[1]
        for k in [k for k, (ref, _) in self.backend.items() if ref.expired()]:
            self.backend_live -= self.backend.pop(k)[1]


def measure_memory(rt, inputs) -> None:
    """One optimized step under :class:`LiveStorages`: the peak bytes each rank really held
    (arenas, inputs and every tensor the step made) next to commopt's prediction."""
    cuda = rt.device.type == "cuda"
    if cuda:  # library workspaces (cuBLAS's) are made by a first step, not counted in one
        run_optimized(rt, fresh_inputs(inputs))
    step_inputs = fresh_inputs(inputs)
    arenas = list(rt.arenas.values())
    counter = LiveStorages([*arenas, *(v for v in step_inputs.values() if isinstance(v, torch.Tensor))])
    if cuda:
        torch.cuda.synchronize(rt.device)
        torch.cuda.reset_peak_memory_stats(rt.device)
        allocated_before = torch.cuda.memory_allocated(rt.device)
    with counter.mode():
        outputs = run_optimized(rt, step_inputs)
    del outputs
    arena_bytes = sum(a.untyped_storage().nbytes() for a in arenas)
    mine = {"rank": rt.rank, "peak_bytes": counter.peak, "arena_bytes": arena_bytes,
            "inputs_bytes": counter.base - arena_bytes, "backend_peak_bytes": counter.backend_peak}
    if cuda:
        # the caching allocator's view of the same step: what it held at the step's start
        # (arenas, inputs) plus the most it added during the step, block rounding and
        # tensors kept for the NCCL stream included
        torch.cuda.synchronize(rt.device)
        added = torch.cuda.max_memory_allocated(rt.device) - allocated_before
        mine["cuda_step_peak_bytes"] = counter.base + added
    every = [None] * rt.world
    dist.all_gather_object(every, mine)
    rt.memory = every
    predicted = PREDICTED_PEAK_BYTES
    for r in every:
        ratio = f", measured / predicted {r['peak_bytes'] / predicted:.3f}" if predicted else ""
        staged = (f"; the backend's own buffers seen at waits, not counted: peak "
                  f"{r['backend_peak_bytes']} bytes" if r["backend_peak_bytes"] else "")
        allocator = (f"; CUDA caching allocator's peak for the step {r['cuda_step_peak_bytes']} "
                     f"bytes" if "cuda_step_peak_bytes" in r else "")
        log(rt, f"memory rank {r['rank']}: peak {r['peak_bytes']} bytes measured (arenas "
                f"{r['arena_bytes']}, inputs {r['inputs_bytes']}), predicted {predicted}{ratio}"
                f"{staged}{allocator}")


def write_results(rt, times_us: list[float], original_us: list[float] | None, args) -> None:
    """Gather every rank's timings; rank 0 prints the median and writes --out."""
    cpu = getattr(rt, "host_cpu_us", None)
    mine = {"rank": rt.rank, "times_us": times_us,
            "median_us": statistics.median(times_us) if times_us else None,
            "host_cpu_median_us": statistics.median(cpu) if cpu else None}
    if original_us is not None:
        mine["original_times_us"] = original_us
        mine["original_median_us"] = statistics.median(original_us) if original_us else None
    every = [None] * rt.world
    dist.all_gather_object(every, mine)
    medians = [r["median_us"] for r in every if r["median_us"] is not None]
    slowest = max(medians) if medians else None
    originals = [r["original_median_us"] for r in every if r.get("original_median_us")]
    original = max(originals) if originals else None
    if slowest is not None:
        log(rt, f"{args.iters} iterations: median {slowest:.1f} us per step (slowest rank)")
    if original is not None and slowest:
        log(rt, f"original order: median {original:.1f} us per step, "
                f"speed-up {original / slowest:.3f}x")
    if args.out and rt.rank == 0:
        result = {"graph": GRAPH_NAME, "world_size": rt.world, "backend": rt.backend,
                  "device": rt.device.type, "buffer_mode": rt.buffer_mode,
                  "cuda_graph": bool(args.cuda_graph), "iters": args.iters,
                  "warmup": args.warmup, "median_us": slowest, "original_median_us": original,
                  "host_cpu_median_us": max((r["host_cpu_median_us"] or 0.0 for r in every),
                                            default=None) if cpu else None,
                  "speedup": original / slowest if original and slowest else None,
                  "copies_per_iter": COPIES_PER_ITER, "zero_copy_per_iter": ZERO_COPY_PER_ITER,
                  "persistent_params": len(PERSISTENT_PARAMS),
                  "predicted_peak_bytes": PREDICTED_PEAK_BYTES,
                  "memory": getattr(rt, "memory", None), "ranks": every}
        tmp = f"{args.out}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
        os.replace(tmp, args.out)


def set_up(rt, args) -> dict:
    """Everything between joining the world and the first step: the plan agreed, groups,
    arenas, operations and emulated nodes ready, the inputs made (and placed). Returns the
    inputs. Also what a harness importing this script calls to time its steps."""
    check_plan_digest(rt)
    create_groups(rt)
    allocate_buffers(rt, args.buffers)
    resolve_ops(rt)
    make_emulated(rt)
    inputs = make_inputs(rt, args)
    place_persistent_params(rt, inputs)
    return inputs


def main(argv=None) -> int:
    """Set up once, then verify, time, profile and dump as asked."""
    args = parse_args(argv)
    if args.cuda_graph and not torch.cuda.is_available():
        print("--cuda-graph needs CUDA", file=sys.stderr)
        return 2
    try:
        rt = init_world(args)
    except RunnerError as exc:
        print(f"[{GRAPH_NAME}] error: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        inputs = set_up(rt, args)
        if args.verify:
            verify(rt, inputs, args)
        if args.memory:
            measure_memory(rt, inputs)
        if args.dump_outputs:
            torch.manual_seed(args.seed)
            outputs = snapshot(run_optimized(rt, fresh_inputs(inputs)))
            torch.save([o.cpu() if isinstance(o, torch.Tensor) else o for o in outputs],
                       args.dump_outputs.replace("{rank}", str(rt.rank)))
        if args.iters > 0:
            write_results(rt, *time_iterations(rt, inputs, args), args)
        if args.profile:
            profile_iterations(rt, inputs, args)
        dist.barrier()
    except RunnerError as exc:
        print(f"[{GRAPH_NAME}] rank {rt.rank}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if rt.owns_world:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
