"""Live tensor memory along an order: the one implementation every pass and report uses.

Accounting rules (the machine model, :mod:`commopt.sim.model`; also in ``docs/estimators.md``):

- a node that owns a storage (it is its own storage root and produces tensors) allocates its
  local tensor bytes (:attr:`TensorMeta.nbytes`) when it runs; a collective allocates its
  output when it is *issued*;
- views, waits, in-place ops (anything with ``alias_of``) and the output node allocate nothing;
- a storage is freed right after the last node that uses any alias of it; a collective keeps
  reading its inputs until its wait, so its inputs live at least until its last wait;
- graph inputs (parameters, buffers, user inputs) are live from the start and never freed:
  the caller owns them, freeing them inside the step would not return memory.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from commopt.errors import OptionError
from commopt.ir.graph import Graph, NodeKind
from commopt.ir.schedule import Schedule
from commopt.sim.model import MemoryModel, memory_model


def peak_memory(graph: Graph, order: Sequence[int], *, padded: bool = False) -> tuple[int, array]:
    """Peak live tensor bytes along ``order`` and the live bytes at each step.

    ``curve[k]`` is the live bytes while ``order[k]`` runs: everything allocated so far and not
    yet freed, including the node's own outputs and its inputs (so the peak counts a node's
    inputs and outputs together). Storage freed after step ``k`` drops out from ``curve[k+1]``.
    Returns ``(peak_bytes, curve)``; the peak is at least the bytes of the graph inputs.
    Order-independent facts are cached per graph, so passes may call this often.
    ``padded=True`` counts every tensor at its largest rank's size, so the result is the
    same on every rank (what the passes' memory budget uses).
    """
    return _live_curve(graph, order, memory_model(graph, padded=padded))


def _live_curve(graph: Graph, order: Sequence[int], model: MemoryModel,
                resident: Collection[int] = (), held: Mapping[int, Sequence[int]] | None = None,
                ) -> tuple[int, array]:
    """Peak and per-step live bytes of ``order`` under ``model``; ``resident`` nodes allocate
    nothing (their storage is a persistent buffer, counted elsewhere); ``held[i]``: more
    storages node ``i`` uses (keeps alive until it runs). Vectorized over the model's arrays
    (:func:`_model_arrays`): the passes replay many orders of one graph."""
    n = len(graph.nodes)
    pos = position_array(Schedule.of(graph, order))
    arrays = _model_arrays(model)
    sizes = arrays.alloc
    if resident:
        sizes = sizes.copy()
        sizes[np.fromiter(resident, dtype=np.int64, count=len(resident))] = 0
    last = pos.copy()  # last position at which each storage is used
    np.maximum.at(last, arrays.release_root, pos[arrays.release_user])
    if held:
        users = np.fromiter((i for i, roots in held.items() for _ in roots), dtype=np.int64)
        roots = np.fromiter((r for rs in held.values() for r in rs), dtype=np.int64)
        np.maximum.at(last, roots, pos[users])
    inputs_live = int(sizes[arrays.is_input].sum())
    freed = np.zeros(n + 1, dtype=np.int64)
    freeable = ~arrays.is_input & (sizes != 0)
    np.add.at(freed, last[freeable] + 1, sizes[freeable])  # dropped from the next step on
    order_arr = np.empty(n, dtype=np.int64)
    order_arr[pos] = np.arange(n, dtype=np.int64)  # the order, from the positions
    allocated = np.where(arrays.is_input[order_arr], 0, sizes[order_arr])
    live = inputs_live + np.cumsum(allocated) - np.cumsum(freed[:n])
    peak = max(inputs_live, int(live.max())) if n else inputs_live
    curve = array("q")
    curve.frombytes(live.astype(np.int64).tobytes())
    return peak, curve


#: The last schedule :func:`position_array` was asked for, and its answer.
_LAST_POSITIONS: tuple[Schedule | None, np.ndarray | None] = (None, None)


def position_array(schedule: Schedule) -> np.ndarray:
    """``schedule.positions`` as a read-only int64 array, remembered for the last schedule
    asked (by identity: schedules are immutable): the footprint of an order replays it
    twice, the buffer lifetimes and the live tensors, and converting 100,000s of ints
    from a tuple costs more than the arithmetic on them."""
    global _LAST_POSITIONS
    last, pos = _LAST_POSITIONS
    if last is not schedule or pos is None:
        pos = np.asarray(schedule.positions, dtype=np.int64).reshape(len(schedule))
        pos.setflags(write=False)
        _LAST_POSITIONS = (schedule, pos)
    return pos


@dataclass(frozen=True, eq=False)
class _ModelArrays:
    """A :class:`MemoryModel` as numpy arrays: bytes per node, which are graph inputs, and
    its ``releases`` flattened into (user, storage) pairs."""

    alloc: np.ndarray
    is_input: np.ndarray
    release_user: np.ndarray
    release_root: np.ndarray


_ARRAYS: weakref.WeakKeyDictionary[MemoryModel, _ModelArrays] = weakref.WeakKeyDictionary()


def _model_arrays(model: MemoryModel) -> _ModelArrays:
    """The model's arrays, built once per model (models are cached per graph)."""
    cached = _ARRAYS.get(model)
    if cached is None:
        if model.release_pairs is not None:
            users, roots = model.release_pairs
        else:  # a model made elsewhere
            counts = [len(r) for r in model.releases]
            users = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
            roots = np.fromiter((r for rs in model.releases for r in rs), dtype=np.int64, count=sum(counts))
        cached = _ModelArrays(np.asarray(model.alloc, dtype=np.int64),
                              np.asarray(model.is_input, dtype=bool), users, roots)
        _ARRAYS[model] = cached
    return cached


_WAIT_INPUTS: weakref.WeakKeyDictionary[MemoryModel, list] = weakref.WeakKeyDictionary()


def _wait_inputs(graph: Graph, model: MemoryModel) -> list[tuple[int, int, list[int]]]:
    """(wait, its collective, the storages of the collective's inputs) for every wait of a
    collective with inputs, in node order (cached per model: footprints of many orders)."""
    cached = _WAIT_INPUTS.get(model)
    if cached is None:
        nodes, roots = graph.nodes, model.roots
        cached = [(w.index, w.wait_of, [roots[p] for p in nodes[w.wait_of].inputs])
                  for w in nodes if w.kind is NodeKind.WAIT and w.wait_of is not None
                  and nodes[w.wait_of].inputs]
        _WAIT_INPUTS[model] = cached
    return cached


@dataclass(frozen=True)
class Footprint:
    """What one rank holds while the emitted program runs: every arena for the whole step
    plus, at each moment, the tensors that do not live in an arena (graph inputs included).
    ``peak_bytes = arena_bytes + other_peak_bytes``."""

    peak_bytes: int
    arena_bytes: int
    other_peak_bytes: int


def footprint(graph: Graph, order: Sequence[int], arena_bytes: int, resident: Collection[int],
              copied: Collection[int], *, padded: bool = False) -> Footprint:
    """The memory the generated runner holds when it runs ``order`` on persistent buffers.

    ``arena_bytes``: all arenas of the buffer plan (allocated once, held for the whole step);
    ``resident``: the nodes whose value is written into an arena (the collectives' outputs
    and the producers that write straight into their buffer), which allocate nothing of
    their own; ``copied``: the collectives whose inputs are copied into a buffer at the
    issue, so the producer's tensor is freed after its last reader instead of being held
    until the wait (other collectives hold their inputs until their waits). This is what
    the runner's ``--memory`` measures (the codegen tests compare the two on the corpus).
    """
    model = memory_model(graph, padded=padded, hold_inputs_until_wait=False)
    copied = set(copied)
    held = {w: roots for w, c, roots in _wait_inputs(graph, model) if c not in copied}
    other, _ = _live_curve(graph, order, model, resident, held)
    return Footprint(arena_bytes + other, arena_bytes, other)


#: Default ``max_memory_increase``: a reordered graph may use at most 10% more peak live
#: memory than the original order. Conservative: one prefetched FSDP layer (a weight
#: all-gathered one layer ahead) fits in a training step whose peak is activations, while
#: raising every all-gather to the top does not.
DEFAULT_MAX_MEMORY_INCREASE = 0.10


def memory_budget(graph: Graph, max_memory_increase: float = DEFAULT_MAX_MEMORY_INCREASE,
                  order: Sequence[int] | None = None) -> int:
    """The peak live memory a reordered graph may reach: ``(1 + max_memory_increase)`` x the
    padded peak of ``order`` (default: the original order). Padded sizes (every tensor at its
    largest rank's size) make the budget, and every decision against it, the same on every
    rank. The passes keep to it; reports and ``check`` show it."""
    check_max_memory_increase(max_memory_increase)
    peak, _ = peak_memory(graph, graph.original_order if order is None else order, padded=True)
    return int(peak * (1.0 + max_memory_increase))


def check_max_memory_increase(value: float) -> None:
    """Raise :class:`OptionError` unless ``-1 < value <= 100`` (a fraction, not percent).

    A negative value asks for an order whose peak is *below* the original's (compute-overlap
    then schedules from a leaner order; when no order meets the budget, the best one that
    holds no more than the original is kept and the summary says the budget was not met).
    """
    if not (isinstance(value, (int, float)) and -1.0 < float(value) <= 100.0):
        raise OptionError(f"max_memory_increase must be a fraction above -1 and at most 100, got {value!r}",
                          field="max_memory_increase")
