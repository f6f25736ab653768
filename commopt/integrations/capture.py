"""Capture a training step of a DTensor-parallel model as one forward+backward graph.

    captured = commopt.capture(step, params, ids, labels)   # inside the job or a fake world
    captured.save("step.pt2")                               # groups recorded in the archive
    commopt.optimize(captured, output_dir="out/")

``torch.export`` cannot trace DTensor parameters in this torch (it fails on the DTensor spec
and on data pointers), and it cannot export a backward pass. The recipe that works, and that
the sample corpus is made with: trace the whole step -- loss *and* gradients, computed with
``torch.autograd.grad`` -- with ``make_fx`` on fake tensors, every DTensor replaced by this
rank's local shard and rebuilt inside the trace with ``DTensor.from_local``; then export the
flat aten + ``_c10d_functional`` graph as a module whose parameters are the local shards.
Collectives DTensor issues (all-gathers of SimpleFSDP parameters, TP all-reduces, their
reduce-scatter / all-reduce gradients) are explicit ops of that graph.

Capture runs under a real process group (inside the job) or the fake one
(:func:`fake_world`: any world size on one CPU process, nothing is communicated). The live
process groups and the DTensors' device mesh are recorded with the program, so the saved
archive knows every group's ranks and mesh dimension.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commopt.errors import OptionError

if TYPE_CHECKING:
    from commopt.ir.graph import Graph
    from commopt.schemas.groups import GroupsDocument

#: The exported module's attribute holding this rank's local shards (its parameters).
SHARDS_ATTR = "shards"


@dataclass(frozen=True)
class CapturedStep:
    """A captured step: the exported program and the process groups it was traced with."""

    program: Any  # torch.export.ExportedProgram
    groups: GroupsDocument

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the program as a ``.pt2`` archive with its groups recorded inside (atomic)."""
        from commopt.io.groups import save_with_groups

        return save_with_groups(self.program, path, groups=self.groups)

    def commopt_graph(self) -> Graph:
        """The program as commopt's IR, its groups' ranks and mesh dimensions filled in."""
        from commopt.io.pt2 import graph_from_torch

        return graph_from_torch(self.program, name="captured",
                                records=[(self.groups, "the groups recorded at capture")])


@dataclass(frozen=True)
class _Slot:
    """How one leaf of the example arguments enters the traced step."""

    kind: str                 # "tensor", "dtensor" or "constant"
    value: Any = None         # the constant itself
    is_param: bool = False    # a parameter of the exported module (else one of its inputs)
    requires_grad: bool = False
    dtensor: tuple | None = None  # (mesh, placements, global shape, global stride)


def capture(step_fn: Callable[..., Any], *example_args: Any, mesh: Any = None,
            name: str = "CapturedStep") -> CapturedStep:
    """Trace ``step_fn(*example_args)`` -- forward and backward -- into one exportable graph.

    ``step_fn`` is the training step written as a function: it computes the loss and returns
    it with the gradients (``torch.autograd.grad``, not ``.backward()``: a graph returns its
    results, it does not accumulate into ``.grad``), e.g. with ``torch.func.functional_call``
    over a parameter dict. ``example_args`` may nest tensors in lists, tuples and dicts:

    - a DTensor enters the trace as this rank's local shard and is rebuilt with
      ``DTensor.from_local`` (same mesh, placements and global shape), ``requires_grad`` kept;
    - an ``nn.Parameter`` (DTensor or not) becomes a parameter of the exported module (its
      state), any other tensor one of its inputs; anything else is a constant of the trace;
    - DTensor results are returned as their local shards (``to_local()``).

    The groups are recorded from the live process groups; ``mesh`` (default: the device mesh
    of the DTensor arguments, when they share one) names their mesh dimensions. Call it after
    ``init_process_group`` -- a real backend or :func:`fake_world`.
    Raises :class:`~commopt.errors.OptionError` when there is no process group or nothing to
    trace, and a one-line :class:`~commopt.errors.CommoptError` when the step cannot be traced
    (e.g. FSDP2's ``fully_shard`` hooks, which read tensor memory directly).
    """
    import torch
    import torch.utils._pytree as pytree

    from commopt.io.groups import record_process_groups

    leaves, spec = pytree.tree_flatten(list(example_args))
    slots = [_slot_of(leaf) for leaf in leaves]
    tensors = [_local(leaf) for leaf, s in zip(leaves, slots, strict=True) if s.kind != "constant"]
    if not tensors:
        raise OptionError("nothing to capture: the example arguments hold no tensor", field="example_args")
    if mesh is None:
        mesh = _common_mesh(slots)
    groups = record_process_groups(mesh)  # also checks that torch.distributed is initialized

    def flat_step(*flat: torch.Tensor) -> tuple[Any, ...]:
        rebuilt = iter(flat)
        args = [s.value if s.kind == "constant" else _rebuild(next(rebuilt), s) for s in slots]
        out = step_fn(*pytree.tree_unflatten(args, spec))
        return tuple(_to_local(o) for o in pytree.tree_leaves(out))

    tensor_slots = [s for s in slots if s.kind != "constant"]
    gm = _trace(flat_step, tensors)
    names = _input_names(step_fn, example_args, slots)
    module = _step_module(name, gm, tensor_slots, tensors, names)
    inputs = tuple(t for t, s in zip(tensors, tensor_slots, strict=True) if not s.is_param)
    return CapturedStep(torch.export.export(module, inputs), groups)


def _slot_of(leaf: Any) -> _Slot:
    import torch
    from torch.distributed.tensor import DTensor

    if isinstance(leaf, DTensor):
        return _Slot("dtensor", is_param=isinstance(leaf, torch.nn.Parameter),
                     requires_grad=leaf.requires_grad,
                     dtensor=(leaf.device_mesh, tuple(leaf.placements), leaf.shape, leaf.stride()))
    if isinstance(leaf, torch.Tensor):
        return _Slot("tensor", is_param=isinstance(leaf, torch.nn.Parameter),
                     requires_grad=leaf.requires_grad)
    return _Slot("constant", value=leaf)


def _local(leaf: Any) -> Any:
    from torch.distributed.tensor import DTensor

    if isinstance(leaf, DTensor):
        return leaf.to_local().detach()
    return leaf.detach() if leaf.requires_grad else leaf  # the same object where it can be


def _rebuild(t: Any, slot: _Slot) -> Any:
    """The traced stand-in of one argument: the local shard, requiring grad and wrapped as a
    DTensor again where the argument was one."""
    from torch.distributed.tensor import DTensor

    if slot.requires_grad:
        t = t.requires_grad_(True)
    if slot.kind == "dtensor":
        mesh, placements, shape, stride = slot.dtensor
        t = DTensor.from_local(t, mesh, placements, run_check=False, shape=shape, stride=stride)
    return t


def _to_local(value: Any) -> Any:
    from torch.distributed.tensor import DTensor

    return value.to_local() if isinstance(value, DTensor) else value


def _common_mesh(slots: list[_Slot]) -> Any:
    """The root device mesh every DTensor argument lives on, or None (no DTensor, or several
    unrelated meshes: groups are then recorded without mesh dimension names)."""
    roots = []
    for s in slots:
        if s.dtensor is not None:
            m = s.dtensor[0]
            root = m._get_root_mesh() if hasattr(m, "_get_root_mesh") else m
            if all(root is not r for r in roots):
                roots.append(root)
    return roots[0] if len(roots) == 1 else None


def _trace(flat_step: Callable[..., Any], tensors: list[Any]) -> Any:
    """make_fx of the flat step on fake tensors (DTensor code traces there; torch.export
    cannot trace it)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from commopt.errors import CommoptError

    try:
        return make_fx(flat_step, tracing_mode="fake", _allow_non_fake_inputs=True)(*tensors)
    except CommoptError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        hint = ""
        if "data pointer" in first:
            hint = (" (the step runs code that reads tensor memory directly, as FSDP2's "
                    "fully_shard hooks do: store parameters SimpleFSDP-style instead, see "
                    "docs/capture.md)")
        raise CommoptError(f"cannot trace the step: {type(exc).__name__}: {first[:300]}{hint}") from exc


def _input_names(step_fn: Callable[..., Any], example_args: tuple[Any, ...],
                 slots: list[_Slot]) -> list[str]:
    """A name per tensor argument: the step's own parameter name for a top-level tensor
    argument, else ``input_<k>`` (k: its place among the flattened arguments)."""
    import torch.utils._pytree as pytree

    try:
        params = [p.name for p in inspect.signature(step_fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    leaf_names: list[str | None] = []
    for i, arg in enumerate(example_args):
        count = len(pytree.tree_leaves(arg))
        single = count == 1 and pytree.tree_leaves(arg)[0] is arg
        leaf_names += [params[i] if single and i < len(params) else None] * count
    names: list[str] = []
    for k, (name, s) in enumerate(zip(leaf_names, slots, strict=True)):
        if s.kind == "constant":
            continue
        if name is None or not name.isidentifier() or name in names or name in ("self", SHARDS_ATTR):
            name = f"input_{k}"
        names.append(name)
    return names


def _step_module(class_name: str, gm: Any, slots: list[_Slot], tensors: list[Any],
                 names: list[str]) -> Any:
    """A module ``class_name`` whose forward calls the traced graph with its inputs and its
    ``shards`` (the parameter tensors, in argument order)."""
    import torch

    shards = [t for t, s in zip(tensors, slots, strict=True) if s.is_param]
    inputs = [n for n, s in zip(names, slots, strict=True) if not s.is_param]
    call, j = [], 0
    for n, s in zip(names, slots, strict=True):
        if s.is_param:
            call.append(f"self.{SHARDS_ATTR}[{j}]")
            j += 1
        else:
            call.append(n)
    n_inputs = len(inputs)
    if call[n_inputs:] == [f"self.{SHARDS_ATTR}[{i}]" for i in range(len(shards))] and shards:
        call = [*call[:n_inputs], f"*self.{SHARDS_ATTR}"]
    source = (f"def forward(self, {', '.join(inputs)}):\n"
              f"    return self.step({', '.join(call)})\n")
    scope: dict[str, Any] = {}
    exec(compile(source, f"<commopt capture of {class_name}>", "exec"), scope)  # noqa: S102

    def __init__(self: Any) -> None:
        torch.nn.Module.__init__(self)
        self.step = gm
        setattr(self, SHARDS_ATTR, torch.nn.ParameterList(
            torch.nn.Parameter(t.clone(), requires_grad=False) for t in shards))

    cls = type(class_name, (torch.nn.Module,), {"__init__": __init__, "forward": scope["forward"]})
    return cls()


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0) -> Iterator[None]:
    """A fake process group of ``world_size`` ranks in this process (this one is ``rank``):
    collectives trace but never communicate, so a step of a world of any size can be captured
    on one CPU process. Destroyed on exit."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not 1 <= world_size <= 1 << 20:
        raise OptionError(f"world size must be a positive number, not {world_size}", field="--world-size")
    if not 0 <= rank < world_size:
        raise OptionError(f"rank {rank} is outside a world of {world_size} ranks", field="--rank")
    if dist.is_initialized():
        raise OptionError("torch.distributed is already initialized: capture in that world "
                          "instead of a fake one")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def load_target(target: str) -> Callable[[], Any]:
    """The function ``MODULE:FUNCTION`` names (``MODULE`` imported from the current directory
    or ``sys.path``); an :class:`~commopt.errors.OptionError` naming what is missing."""
    import importlib
    import sys

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise OptionError(f"expected MODULE:FUNCTION, got {target!r}", field="MODULE:FUNCTION")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise OptionError(f"cannot import {module_name!r}: {exc}", field="MODULE:FUNCTION") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise OptionError(f"module {module_name!r} has no function {attr!r}", field="MODULE:FUNCTION")
    return fn


def call_target(target: str, fn: Callable[[], Any]) -> Any:
    """``fn()``; an exception it raises (the user's model code, or the trace of it) becomes a
    one-line :class:`~commopt.errors.CommoptError` naming ``target`` (``--debug`` shows the
    traceback)."""
    from commopt.errors import CommoptError

    try:
        return fn()
    except CommoptError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: reported, not a commopt bug
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CommoptError(f"{target} failed: {type(exc).__name__}: {first[:300]}") from exc
