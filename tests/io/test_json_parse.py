"""parse_json_bytes reads with pydantic-core's parser: the values :func:`json.loads` gives, and
for what that parser refuses, the error (or the value) the standard parser gives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commopt.errors import GraphError
from commopt.io.json_graph import parse_json_bytes, parse_json_text


def _outcome(parse):
    """The value with its exact types (repr tells 1 from 1.0 from True), or the error line."""
    try:
        return repr(parse())
    except GraphError as exc:
        return f"error: {exc}"


def _same_as_the_standard_parser(data: bytes) -> None:
    def standard():
        return parse_json_text(data.decode("utf-8"), file="f.json")

    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # worded before any parser runs (test_not_utf8_names_the_byte)
    assert _outcome(lambda: parse_json_bytes(data, file="f.json")) == _outcome(standard)


EDGE_CASES = [
    # values
    b'{"a": 1, "b": 2, "a": 3}', b"-0", b"-0.0", b"1E5", b"1e5", b"0.1", b"5e-324", b"1e-400",
    b"1.7976931348623157e308", b"1e400", b"-1e400", b"9007199254740993", b"9007199254740993.0",
    b"2.2250738585072011e-308", b"4.9406564584124654e-324", b"123456789012345678901234567890",
    b"1" * 4300, b'"\\ud83d\\udca5"', b'"\\u0000\\/\\b\\f\\n\\r\\t"', b'"\xc2\x80\x7f"',
    b"[1\r\n,\t2] ", b"[" * 99 + b"]" * 99,
    # what one of the parsers refuses
    b"", b"  ", b"NaN", b"Infinity", b"-Infinity", b"nan", b"1" * 4301, b'"a\tb"', b'"a\x01b"',
    b'"\\ud800"', b'{"\\udca5": 1}', b'"\\udca5\\ud83d"', b'"\\ud83d\\u0041"', b"\xef\xbb\xbf{}",
    b"{} x", b"[1,]", b'{"a": 1,}', b"\x0c{}", b"01", b"1.", b".5", b"+1", b'"\\x"', b'"a',
    b"[" * 150 + b"]" * 150, b"[" * 300 + b"]" * 300, b"[" * 5000 + b"]" * 5000,
]


@pytest.mark.parametrize("data", EDGE_CASES, ids=lambda d: repr(d[:24]))
def test_edge_cases_read_as_the_standard_parser_reads_them(data):
    _same_as_the_standard_parser(data)


def test_not_utf8_names_the_byte():
    with pytest.raises(GraphError, match=r"not UTF-8 text \(invalid start byte at byte 2\)"):
        parse_json_bytes(b'["\xff"]')


_scalars = (st.none() | st.booleans() | st.integers() | st.text()
            | st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("ensure_ascii", [True, False])
@given(value=_values)
def test_any_json_value_reads_as_the_standard_parser_reads_it(ensure_ascii, value):
    _same_as_the_standard_parser(json.dumps(value, ensure_ascii=ensure_ascii).encode())


_number = st.from_regex(r"\A-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?\Z")


@given(number=_number)
def test_any_json_number_reads_as_the_standard_parser_reads_it(number):
    _same_as_the_standard_parser(f"[{number}]".encode())


def test_equal_short_strings_are_one_object():
    first, second = parse_json_bytes(json.dumps(["aten.mm.default", "aten.mm.default"]).encode())
    assert first is second
