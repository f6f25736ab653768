"""The runner's compiled step: straight-line functions run the entries as the loop would."""

from __future__ import annotations

from tests.codegen.conftest import template_module

TEMPLATE = template_module()


def _run_as_loop(entries, env: list) -> list:
    """The entries' meaning, one at a time: env[out] = call(*env[slots], **kwargs), frees."""
    for call, slots, kwargs, out, frees in entries:
        env[out] = call(*(env[s] for s in slots), **(kwargs or {}))
        for j in frees:
            env[j] = None
    return env


def _entries(count: int) -> list:
    """A chain of ``count`` entries over a growing env: sums, keyword calls, no-argument
    calls, and frees of values no later entry reads."""
    calls = [(lambda a, b: a + b), (lambda a, scale=1: a * scale), (lambda: 7)]
    entries = []
    for k in range(count):
        out = 2 + k
        kind = k % 3
        if kind == 0:
            entries.append((calls[0], [out - 1, out - 2], None, out, ()))
        elif kind == 1:
            entries.append((calls[1], [out - 1], {"scale": 3}, out, (out - 2,) if k > 2 else ()))
        else:
            entries.append((calls[2], [], None, out, ()))
    return entries


def test_compiled_parts_run_the_entries_in_order_across_part_boundaries() -> None:
    count = 2 * TEMPLATE.ENTRIES_PER_PART + 5
    entries = _entries(count)
    parts = TEMPLATE.compile_entries(entries)
    assert len(parts) == 3  # split at ENTRIES_PER_PART
    env = [1, 2] + [None] * count
    for part in parts:
        part(env)
    assert env == _run_as_loop(entries, [1, 2] + [None] * count)
    assert env[-1] is not None and None in env  # the frees happened


def test_no_entries_compile_to_no_parts() -> None:
    assert TEMPLATE.compile_entries([]) == []
