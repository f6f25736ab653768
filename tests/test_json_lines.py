"""compact_encoder gives exactly the text of the ordinary JSON encoder it replaces."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.json_lines import compact_encoder

SEPARATORS = [(", ", ": "), (",", ":")]

_scalars = (st.none() | st.booleans() | st.integers() | st.text()
            | st.floats(allow_nan=True, allow_infinity=True))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("separators", SEPARATORS)
@given(value=_values)
def test_same_text_as_the_json_encoder(ensure_ascii: bool, separators: tuple[str, str],
                                       value: object) -> None:
    ours = compact_encoder(ensure_ascii=ensure_ascii, separators=separators)
    assert ours(value) == json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators).encode(value)


def test_a_runner_step_record_and_a_trace_event() -> None:
    record = (7, "mm_\u00e9", "op", (3, 4), "aten_mm_default", [{"v": 3}, {"v": 4}], {},
              ("out", "b12", "aten_mm_out"))
    event = {"name": "wait_1", "ph": "X", "ts": 1.5, "dur": 0, "args": {"bytes": 2**40}}
    assert compact_encoder(ensure_ascii=True, separators=(", ", ": "))(record) == json.dumps(record)
    assert compact_encoder(ensure_ascii=False, separators=(",", ":"))(event) == json.dumps(
        event, ensure_ascii=False, separators=(",", ":"))


def test_a_value_json_cannot_spell_is_refused() -> None:
    with pytest.raises(TypeError):
        compact_encoder(ensure_ascii=True, separators=(", ", ": "))({"x": object()})
