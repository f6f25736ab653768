"""Keeping the cyclic garbage collector away from long-lived objects while a command runs.

A 100k-node graph is millions of Python objects that live for the whole command; every full
collection would scan them all again, about a quarter of ``optimize``'s CPU time at that
size. :func:`freezing_gc` wraps a command: inside it :func:`freeze_long_lived` moves every
object alive so far out of the collector's view (``gc.freeze``), and on the way out they are
handed back (``gc.unfreeze``), so nothing stays frozen after the call. Reference counting
still frees frozen objects; only cycles among them wait until the unfreeze.

Inside the command the youngest generation is also collected less often
(:data:`YOUNG_THRESHOLD` allocations instead of Python's 700): the stages build and drop
hundreds of thousands of acyclic objects (events, lists, tuples), which reference counting
frees, and at the default threshold the collector ran thousands of times and every tenth of
those promoted survivors towards full collections (100k nodes: ~2 s of ~18 s CPU). Cycles are
still collected, only in larger batches; the caller's thresholds are restored on the way out.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: Allocations (net of frees) between collections of the youngest generation inside a command.
YOUNG_THRESHOLD = 100_000

_OWNER: contextvars.ContextVar[bool] = contextvars.ContextVar("commopt_gc_freeze_owner", default=False)


def freezing_gc(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so :func:`freeze_long_lived` works inside it. It does nothing when
    something else already froze objects (the caller owns the collector then)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if _OWNER.get() or gc.get_freeze_count():
            return fn(*args, **kwargs)
        token = _OWNER.set(True)
        thresholds = gc.get_threshold()
        gc.set_threshold(max(YOUNG_THRESHOLD, thresholds[0]), *thresholds[1:])
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*thresholds)
            _OWNER.reset(token)
            gc.unfreeze()

    return wrapper


def freeze_long_lived() -> None:
    """Inside a :func:`freezing_gc` command: keep the collector off everything alive now
    (a stage's results that later stages keep, e.g. the loaded graph). Elsewhere: nothing."""
    if _OWNER.get():
        gc.freeze()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collection while the block runs; the collector's previous state is restored after.
    Building millions of small, acyclic objects that all live on (a loaded graph) otherwise
    triggers full collections that rescan everything already built. Inside a command, freeze
    what the block built (:func:`freeze_long_lived`) before leaving it, or the first
    collection after it scans all of it once."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
