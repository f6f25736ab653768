"""JSON text of many small plain values, one call each: the writers that emit a line per node.

``json.dumps`` / ``JSONEncoder.encode`` build a new C encoder on every call (checking their
options, a circular-reference map, ...): a few microseconds that dominate when a 100k-node
output encodes a small record per node. :func:`compact_encoder` builds the C encoder once;
its text is exactly ``JSONEncoder(ensure_ascii=..., separators=...).encode``'s.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any


def compact_encoder(*, ensure_ascii: bool, separators: tuple[str, str]) -> Callable[[Any], str]:
    """A function giving ``JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)
    .encode(value)`` for plain data (str, int, float, bool, None, lists, tuples and dicts of
    those). It does not look for circular references: the values are ones commopt built."""
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator in this interpreter: the ordinary encoder
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item_separator, key_separator = separators
    chunks = make(None, encoder.default, strings, None, key_separator, item_separator,
                  False, False, True)
    join = "".join
    return lambda value: join(chunks(value, 0))


#: ``json.dumps(value, ensure_ascii=False)`` of plain data: the one-line-per-item writers
#: (the JSON graph's nodes, the buffer plan's buffers) share it.
dumps_line = compact_encoder(ensure_ascii=False, separators=(", ", ": "))
