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

from array import array
from collections.abc import Sequence

from commopt.errors import OptionError
from commopt.ir.graph import Graph
from commopt.ir.schedule import Schedule
from commopt.sim.model import memory_model


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
    n = len(graph.nodes)
    pos = Schedule.of(graph, order).positions
    model = memory_model(graph, padded=padded)
    sizes, is_input = model.alloc, model.is_input
    last = list(pos)  # last position at which each storage is used
    for i, releases in enumerate(model.releases):
        p_i = pos[i]
        for r in releases:
            if last[r] < p_i:
                last[r] = p_i
    freed = [0] * n
    live = 0
    for i in range(n):
        s = sizes[i]
        if not s:
            continue
        if is_input[i]:
            live += s
        else:
            freed[last[i]] += s
    curve = array("q", bytes(8 * n))
    peak = live
    for k in range(n):
        i = order[k]
        if not is_input[i]:
            live += sizes[i]
        curve[k] = live
        if live > peak:
            peak = live
        live -= freed[k]
    return peak, curve


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

    A negative value asks for an order whose peak is *below* the original's (the passes then
    favour memory; when no such order is found the best one found is kept and the summary
    says the budget was not met).
    """
    if not (isinstance(value, (int, float)) and -1.0 < float(value) <= 100.0):
        raise OptionError(f"max_memory_increase must be a fraction above -1 and at most 100, got {value!r}",
                          field="max_memory_increase")
