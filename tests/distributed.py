"""Real multi-process collectives for tests: gloo over 127.0.0.1, no GPU.

    from tests.distributed import run_gloo, run_archives

    def _body(rank, world_size, scale):          # module level: it is pickled by name
        t = torch.full((2,), float(rank + 1)) * scale
        dist.all_reduce(t)
        return t

    results = run_gloo(_body, 2, 3.0)             # [rank 0's result, rank 1's result]

:func:`run_gloo` starts ``world_size`` spawned processes that join one gloo world through a
FileStore, runs ``fn(rank, world_size, *args)`` in each and returns the results by rank; an
exception on any rank is re-raised here with every failing rank's traceback. Every gloo group
of those processes runs its collectives on one worker thread (:data:`GLOO_WORKER_THREADS`).
:func:`run_archives` runs ``.pt2`` archives on the current rank (use it inside ``fn``):
it recreates the archive's recorded process groups, maps each recorded group name to this
rank's group of the same mesh dimension, and runs the exported graph eagerly with the
archive's sample inputs and state dict.
"""

from __future__ import annotations

import os
import queue as queue_mod
import tempfile
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 240.0
#: Worker threads of every gloo process group the tests create (torch's default is 2). With
#: one, a group runs its collectives one at a time in issue order -- as NCCL runs a group's
#: collectives on its stream and as commopt models them -- still asynchronously beside the
#: compute of the thread that issued them. With two, two collectives of one group run at once
#: over the group's one gloo context, and under that load 1 run in about 40 of the 4-rank
#: equivalence tests died in a gloo thread (``malloc(): unaligned tcache chunk detected``,
#: SIGSEGV); see docs/runner.md, "On CPU (gloo)".
GLOO_WORKER_THREADS = 1
#: Prefix of a rank's report when its own work succeeded but the final barrier failed
#: (a peer failed or died): the peer's report, not this one, names the cause.
PEER_FAILED = "peer failed before the final barrier:\n"
_POLL_S = 1.0  # how often a wait for results checks for ranks killed by a signal


def _to_bytes(value: Any) -> bytes:
    # Tensors through a multiprocessing queue travel as shared-memory handles that die with
    # the sending process; serialized bytes survive it.
    import io

    import torch

    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


def _from_bytes(data: bytes) -> Any:
    import io

    import torch

    return torch.load(io.BytesIO(data), weights_only=False)  # our own child's result


def use_gloo_worker_threads(threads: int = GLOO_WORKER_THREADS) -> None:
    """Make every gloo process group created after this call, in this process, run its
    collectives on ``threads`` worker threads (``init_process_group``, ``new_group`` and
    ``DeviceMesh`` all build gloo backends through the class patched here): the generated
    runner's own ``limit_gloo_threads``, so tests and runners set it the same way."""
    from commopt.codegen.runner_template import limit_gloo_threads

    limit_gloo_threads(threads)


def gloo_worker_threads(group: Any = None) -> int:
    """How many worker threads the gloo backend of ``group`` (default: the world) runs."""
    import torch
    import torch.distributed as dist

    group = group if group is not None else dist.group.WORLD
    return group._get_backend(torch.device("cpu")).options._threads


def _worker(fn: Callable[..., Any], rank: int, world_size: int, init_file: str,
            args: tuple[Any, ...], results: Any, timeout_s: float) -> None:
    import faulthandler

    import torch
    import torch.distributed as dist

    # A native crash (glibc heap check, SIGSEGV) in a rank would otherwise show only as
    # "Connection reset by peer" on its peers: dump every thread's Python stack to stderr.
    faulthandler.enable(all_threads=True)
    torch.set_num_threads(1)
    try:
        use_gloo_worker_threads()
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=timeout_s))
        if gloo_worker_threads() != GLOO_WORKER_THREADS:
            raise RuntimeError(f"the gloo world runs {gloo_worker_threads()} worker threads, "
                               f"the harness asked for {GLOO_WORKER_THREADS}")
        # every rank's connections are up before any rank's work starts: a rank whose work
        # fails at once tears its connections down, and a peer still connecting would fail in
        # init_process_group, a failure of its own that hides the cause
        dist.barrier()
        try:
            value = fn(rank, world_size, *args)
        except BaseException:
            dist.destroy_process_group()
            raise
        try:
            # every rank finished its collectives before any closes its connections: a rank
            # that tears down while a peer's gloo threads still send to it resets them
            dist.barrier()
        except BaseException:
            results.put((rank, False, PEER_FAILED + traceback.format_exc()))
            return
        finally:
            dist.destroy_process_group()
        results.put((rank, True, _to_bytes(value)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def run_gloo(fn: Callable[..., Any], world_size: int, *args: Any,
             timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; results by rank.

    ``fn`` and ``args`` must be picklable (``fn`` defined at module level); results too.
    """
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="commopt-gloo-") as tmp:
        init_file = os.path.join(tmp, "store")
        procs = [
            ctx.Process(target=_worker, args=(fn, r, world_size, init_file, args, results, timeout_s),
                        daemon=True)
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        got: dict[int, tuple[bool, Any]] = {}
        crashed: dict[int, int] = {}
        try:
            crashed = _collect(procs, results, got, timeout_s)
        finally:
            for p in procs:
                p.join(timeout=5 if len(got) == world_size else 0.5)
            crashed = crashed or _crashed_ranks(procs, got)  # before we terminate the rest
            for p in procs:
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)
    failures = {r: v for r, (ok, v) in got.items() if not ok}
    if any(not v.startswith(PEER_FAILED) for v in failures.values()):
        # a rank whose own work failed is the cause; peers stuck in the final barrier are not
        failures = {r: v for r, v in failures.items() if not v.startswith(PEER_FAILED)}
    if failures or crashed:
        text = "\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(failures.items()))
        raise RuntimeError(f"{len(failures) + len(crashed)} rank(s) failed:\n{crashed_text(crashed)}{text}")
    return [_from_bytes(got[r][1]) for r in range(world_size)]


def _collect(procs: Sequence[Any], results: Any, got: dict[int, tuple[bool, Any]],
             timeout_s: float) -> dict[int, int]:
    """Fill ``got`` from the queue until every rank answered, one failed, or one crashed.

    Returns the ranks that died by a signal without a result (then we stop waiting at once:
    its peers would otherwise block until the gloo timeout).
    """
    import time

    deadline = time.monotonic() + timeout_s
    while len(got) < len(procs):
        try:
            rank, ok, value = results.get(timeout=_POLL_S)
        except queue_mod.Empty:
            crashed = _crashed_ranks(procs, got)
            if crashed:
                return crashed
            if time.monotonic() > deadline:
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in got]
                raise RuntimeError(f"gloo run timed out after {timeout_s:.0f} s "
                                   f"(ranks exited without a result: {dead})") from None
            continue
        got[rank] = (ok, value)
        if not ok and not value.startswith(PEER_FAILED):
            break  # a rank's own failure: its peers may never answer
    return {}


def _crashed_ranks(procs: Sequence[Any], got: dict[int, tuple[bool, Any]]) -> dict[int, int]:
    """Ranks that died by a signal without sending a result: rank -> signal number."""
    return {r: -p.exitcode for r, p in enumerate(procs)
            if r not in got and p.exitcode is not None and p.exitcode < 0}


def crashed_text(crashed: dict[int, int]) -> str:
    """One line per rank killed by a signal (a native crash its peers see as a reset)."""
    import signal

    lines = []
    for r, sig in sorted(crashed.items()):
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        lines.append(f"--- rank {r} --- died with {name} (native crash; see its stderr)\n")
    return "".join(lines)


# --------------------------------------------------------------------------- archives
def read_groups_record(path: str | os.PathLike[str]):
    """The process-group record stored in an archive (or None)."""
    import zipfile

    from commopt.io.groups import ARCHIVE_GROUPS_NAME, parse_groups_text

    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith(f"/extra/{ARCHIVE_GROUPS_NAME}"):
                return parse_groups_text(zf.read(name).decode("utf-8"), file=str(path))
    return None


def recreate_groups(doc: Any) -> dict[str, str]:
    """Create the recorded groups on this rank; recorded name -> this rank's group name.

    Every rank calls this with the same record. Groups with a mesh dimension are recreated by
    building the same DeviceMesh (row-major); a group holding every rank is the world group;
    other groups are created with ``new_group`` in record order.
    """
    import torch.distributed as dist

    mapping: dict[str, str] = {}
    if doc is None:
        return mapping
    world = dist.get_world_size()
    mesh = None
    if doc.mesh:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", tuple(doc.mesh.values()), mesh_dim_names=tuple(doc.mesh))
    for rec in doc.groups:
        if rec.mesh_dim is not None and mesh is not None:
            mapping[rec.name] = mesh.get_group(rec.mesh_dim).group_name
        elif sorted(rec.ranks) == list(range(world)):
            mapping[rec.name] = dist.group.WORLD.group_name
        else:
            pg = dist.new_group(rec.ranks)
            if dist.get_rank() in rec.ranks:
                mapping[rec.name] = pg.group_name
    return mapping


def rename_groups(ep: Any, mapping: dict[str, str]) -> Any:
    """A copy of ``ep``'s graph module whose collectives use the mapped group names."""
    import copy

    from commopt.io.classify import classify

    gm = copy.deepcopy(ep.graph_module)
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        facts = classify(node.target)
        if facts.collective is None or facts.arg_names is None:
            continue
        pos = facts.arg_names.index("group_name")
        if pos < len(node.args):
            old = node.args[pos]
            if old in mapping:
                node.args = (*node.args[:pos], mapping[old], *node.args[pos + 1:])
        elif node.kwargs.get("group_name") in mapping:
            node.kwargs = {**node.kwargs, "group_name": mapping[node.kwargs["group_name"]]}
    gm.recompile()
    return gm


def flat_inputs(ep: Any, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None) -> list[Any]:
    """The placeholder values of ``ep``'s graph: state dict, constants and user inputs."""
    import torch.utils._pytree as pytree
    from torch.export.graph_signature import InputKind

    if args is None:
        args, kwargs = ep.example_inputs
    user = iter(pytree.tree_leaves((tuple(args), dict(kwargs or {}))))
    values: list[Any] = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            values.append(next(user))
        elif spec.kind is InputKind.PARAMETER:
            values.append(ep.state_dict[spec.target].detach())
        elif spec.kind is InputKind.BUFFER:
            src = ep.state_dict if spec.persistent else ep.constants
            values.append(src[spec.target])
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values.append(ep.constants[spec.target])
        else:
            raise NotImplementedError(f"input kind {spec.kind} is not supported by the test harness")
    return values


def run_exported(ep: Any, mapping: dict[str, str] | None = None, args: Sequence[Any] | None = None,
                 kwargs: dict[str, Any] | None = None) -> list[Any]:
    """Run ``ep``'s FX graph eagerly on this rank; returns its flat outputs (detached).

    Works for joint forward+backward exports too (``ep.module()`` does not), because it calls
    the graph module with the lifted parameters directly.
    """
    import torch

    gm = rename_groups(ep, mapping or {})
    with torch.no_grad():
        out = gm(*flat_inputs(ep, args, kwargs))
    return [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in out]


def load_archive(path: str | os.PathLike[str]) -> Any:
    """``torch.export.load`` of ``path`` through commopt's loader, which only remembers the
    deserializer's type hints (``tests/io/test_export_load.py``: the same program and weights
    as torch's own load): a repeated load takes about half the time, a process's first about
    a third less (llama_fsdp 1.30 -> 0.62 s, llama_tp_L8 5.7-6.9 -> 4.2-4.6 s); the gloo
    launches load dozens."""
    from commopt.io.export_load import load_exported_program

    return load_exported_program(str(Path(path)))


def run_archives(paths: Sequence[str | os.PathLike[str]]) -> list[list[Any]]:
    """Run each ``.pt2`` archive on this rank (call inside a :func:`run_gloo` body).

    The groups recorded in the first archive are created once; every archive must use the
    same groups. Returns each archive's flat outputs.
    """
    doc = read_groups_record(paths[0])
    mapping = recreate_groups(doc)
    results = []
    for p in paths:
        results.append(run_exported(load_archive(p), mapping))
    return results
