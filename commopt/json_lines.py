"""JSON text of many small plain values, one call each: the writers that emit a line per node.

``json.dumps`` / ``JSONEncoder.encode`` build a new C encoder on every call (checking their
options, a circular-reference map, ...): a few microseconds that dominate when a 100k-node
output encodes a small record per node. :func:`compact_encoder` builds the C encoder once;
its text is exactly ``JSONEncoder(ensure_ascii=..., separators=...).encode``'s.
"""

from __future__ import annotations

import functools
import json
import json.encoder
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any


def compact_encoder(*, ensure_ascii: bool, separators: tuple[str, str]) -> Callable[[Any], str]:
    """A function giving ``JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)
    .encode(value)`` for plain data (str, int, float, bool, None, lists, tuples and dicts of
    those). It does not look for circular references: the values are ones commopt built."""
    chunks = _c_chunks(ensure_ascii, separators)
    if chunks is None:  # no C accelerator in this interpreter: the ordinary encoder
        return json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators).encode
    join = "".join
    return lambda value: join(chunks(value, 0))


def compact_each(*, ensure_ascii: bool, separators: tuple[str, str]
                 ) -> Callable[[Iterable[Any]], Iterator[str]]:
    """A function giving :func:`compact_encoder`'s text of each of many values, lazily, with
    no Python call per value (C ``map``s over the C encoder): the runner's step table encodes
    100,000s of small rows, where a Python-level call per row cost ~5% of their encoding."""
    chunks = _c_chunks(ensure_ascii, separators)
    if chunks is None:  # no C accelerator: the ordinary encoder, value by value
        return functools.partial(map, compact_encoder(ensure_ascii=ensure_ascii,
                                                      separators=separators))
    join = "".join
    return lambda values: map(join, map(chunks, values, repeat(0)))


def _c_chunks(ensure_ascii: bool, separators: tuple[str, str]) -> Callable[[Any, int], Any] | None:
    """The C encoder ``JSONEncoder.encode`` builds per call, built once (None: no C
    accelerator); called with a value and 0 it gives the value's text in pieces."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item_separator, key_separator = separators
    return make(None, encoder.default, strings, None, key_separator, item_separator,
                False, False, True)


#: ``json.dumps(value, ensure_ascii=False)`` of plain data: the one-line-per-item writers
#: (the JSON graph's nodes, the buffer plan's buffers) share it.
dumps_line = compact_encoder(ensure_ascii=False, separators=(", ", ": "))
