"""The estimator protocol and the chain that gives every node a duration.

An estimator answers "how long does this node take?" in microseconds, or ``None`` to let the
next estimator in the chain answer. A chain always ends with the analytical estimator, so
every node gets a value. Rules the chain applies before asking any estimator:

- inputs, outputs, views and waits take 0 (a wait's cost is the blocking the simulator
  computes, not a kernel);
- a node whose ``duration_us`` was given in the graph file keeps it: the file is the most
  specific source there is (a measured or hand-set value for exactly this node).
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

from commopt.errors import CommoptError
from commopt.ir.graph import Graph, Node, NodeKind

#: What :attr:`EstimatorChain.sources` records for the two rules above.
ZERO_SOURCE = "zero"
FILE_SOURCE = "graph file"

_ZERO_KINDS = frozenset((NodeKind.INPUT, NodeKind.OUTPUT, NodeKind.VIEW, NodeKind.WAIT))


class EstimatorError(CommoptError):
    """An estimator could not be built or failed on a node."""


def duration_value(label: str, value: object, *, node: str | None = None) -> float:
    """``value`` (what estimator ``label`` returned) as a duration in microseconds: a real
    number (not a string or bool), finite and >= 0; else an :class:`EstimatorError` naming
    the estimator and node, since the simulator and every output need finite numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise EstimatorError(f"estimator {label!r} returned {shown} ({type(value).__name__}); "
                             "a duration is a number of microseconds", node=node, field="--estimator")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not (out >= 0.0 and math.isfinite(out)):
        shown = repr(out) if math.isfinite(out) or out != out or not isinstance(value, int) \
            else f"an integer of {len(str(abs(value)))} digits"
        raise EstimatorError(f"estimator {label!r} returned {shown}; durations are finite and >= 0",
                             node=node, field="--estimator")
    return out


@runtime_checkable
class Estimator(Protocol):
    """Gives a node's duration in microseconds, or None to defer to the next estimator."""

    name: str

    def estimate(self, node: Node, graph: Graph) -> float | None:
        """Duration of ``node`` in microseconds, or None when this estimator does not know."""
        ...


class EstimatorChain:
    """Estimators asked in order; the first non-None answer wins.

    ``notes`` collects what the estimators want the user to know (assumptions, fallbacks),
    each once, in the order they came up.
    """

    def __init__(self, estimators: list[Estimator], *, notes: list[str] | None = None) -> None:
        if not estimators:
            raise ValueError("an estimator chain needs at least one estimator")
        self.estimators = list(estimators)
        self.sources: list[str] = []
        self._own_notes = list(notes or ())
        #: compute slowdown beside communication the chain's options asked for (None: off;
        #: :func:`commopt.estimators.slowdown.applied_slowdown`), set by ``resolve``
        self.slowdown = None

    @property
    def compute_slowdown(self) -> float:
        """The factor every simulation with these durations applies (1.0: off)."""
        return 1.0 if self.slowdown is None else self.slowdown.factor

    @property
    def name(self) -> str:
        """The chain as a spec, e.g. ``profile,analytical`` (what reports label numbers with)."""
        return ",".join(e.name for e in self.estimators)

    @property
    def notes(self) -> list[str]:
        """Notes of every estimator in the chain, deduplicated, in order."""
        seen: dict[str, None] = dict.fromkeys(self._own_notes)
        for e in self.estimators:
            for note in getattr(e, "notes", ()) or ():
                seen.setdefault(note, None)
        return list(seen)

    def estimate(self, node: Node, graph: Graph) -> tuple[float, str]:
        """Duration of one node and the name of what gave it."""
        if node.kind in _ZERO_KINDS:
            return 0.0, ZERO_SOURCE
        if node.duration_us is not None:
            return float(node.duration_us), FILE_SOURCE
        for est in self.estimators:
            try:
                value = est.estimate(node, graph)
            except (CommoptError, KeyboardInterrupt):
                raise
            except BaseException as exc:  # SystemExit too: a plug-in must not end the run
                raise EstimatorError(
                    f"estimator {est.name!r} failed: {type(exc).__name__}: {exc}", node=node.name
                ) from exc
            if value is None:
                continue
            if type(value) is float and 0.0 <= value < math.inf:  # duration_value's common case
                return value, est.name
            return duration_value(est.name, value, node=node.name), est.name
        raise EstimatorError(
            f"no estimator in the chain {self.name!r} gave a duration", node=node.name
        )

    def durations(self, graph: Graph) -> list[float]:
        """Duration in microseconds of every node, indexed like ``graph.nodes``.

        Also sets :attr:`sources`: which estimator (or rule) gave each node's value.
        """
        out = [0.0] * len(graph.nodes)
        sources = [ZERO_SOURCE] * len(graph.nodes)
        zero_kinds = _ZERO_KINDS
        estimate = self.estimate
        for node in graph.nodes:
            if node.kind not in zero_kinds:  # those keep the 0.0 and ZERO_SOURCE set above
                out[node.index], sources[node.index] = estimate(node, graph)
        self.sources = sources
        return out
