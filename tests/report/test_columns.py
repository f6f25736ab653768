"""Report rows kept column by column read and write as the list of models they replace, and
the writers' whole-column number helpers give what their one-value versions give."""

from __future__ import annotations

import itertools
import json
import math
import random
import struct

from pydantic import TypeAdapter

from commopt.report.fmt import INT, MS, number_rows, rounded_ms, rounded_ms_json
from commopt.report.trace import _ns, _span_ns
from commopt.schemas.report import EventColumns, NodeColumns, NodeInfo, ReportEvent

_ROWS = [
    {"node": "mm0", "lane": "compute", "row": 0, "step": 3, "start_us": 0.0, "end_us": 1.5,
     "exposed": False},
    {"node": "ag_wait", "lane": "compute", "row": 0, "step": 4, "start_us": 1.5, "end_us": 2.25,
     "exposed": True},
    {"node": "ag", "lane": "comm:dp", "row": 1, "step": 2, "start_us": 0.5, "end_us": 2.25,
     "exposed": False},
]


def test_columns_read_and_write_the_json_of_the_list_of_models():
    as_list = TypeAdapter(list[ReportEvent])
    as_columns = TypeAdapter(EventColumns)
    models = as_list.validate_python(_ROWS)
    columns = as_columns.validate_json(as_list.dump_json(models))
    assert isinstance(columns, EventColumns) and len(columns) == 3
    assert as_columns.dump_json(columns, indent=2) == as_list.dump_json(models, indent=2)
    assert as_columns.dump_python(columns) == as_list.dump_python(models) == _ROWS
    assert as_columns.json_schema() == as_list.json_schema()
    assert list(columns) == models and columns[1] == models[1] and columns[1:] == models[1:]
    assert columns == EventColumns.from_rows(models) and columns == models
    assert as_columns.validate_python(columns) is columns  # taken as it is


def test_columns_reject_what_the_list_rejects():
    bad = [dict(_ROWS[0], start_us="soon")]
    for adapter in (TypeAdapter(list[ReportEvent]), TypeAdapter(EventColumns)):
        try:
            adapter.validate_python(bad)
        except ValueError as exc:
            assert "start_us" in str(exc)
        else:
            raise AssertionError("accepted a bad event")


def test_node_columns_keep_field_order_and_none():
    node = NodeInfo(name="x", op="aten.mm", kind="compute", duration_us=1.0, bytes=8)
    columns = NodeColumns.from_rows([node])
    assert list(columns.columns) == list(NodeInfo.model_fields)
    assert columns.plain_rows() == [node.model_dump()]


def _tricky_floats() -> list[float]:
    rng = random.Random(7)
    values = [rng.random() * 10 ** rng.randint(-4, 9) for _ in range(20000)]
    values += [k / 2000 for k in range(4000)] + [k / 8 for k in range(2000)]  # exact halves
    values += [1.0625, 0.0005, 2.675, 5e-324, 0.0, -0.0, -1.2345, 12345.6785, 1e15 + 0.5]
    bits = (struct.unpack("d", struct.pack("Q", rng.getrandbits(62)))[0] for _ in range(20000))
    values += [v for v in bits if abs(v) < 1e12]
    return values


def test_rounded_ms_is_round_to_three_places():
    values = _tricky_floats()
    assert list(map(repr, rounded_ms(values))) == [repr(round(v, 3)) for v in values]
    assert rounded_ms([]) == []


def test_rounded_ms_json_is_json_of_round_to_three_places():
    values = _tricky_floats() + [math.nan, math.inf, -math.inf, 2e12, -1e-4]
    assert rounded_ms_json(values) == [json.dumps(round(v, 3)) for v in values]
    assert rounded_ms_json([]) == []


def test_number_rows_are_each_rows_values_as_json_with_their_offsets():
    values = _tricky_floats() + [math.nan, math.inf, 2e12, -1e-4]
    rng = random.Random(3)
    ints = [rng.choice([0, 7, 10, 999, 10**12, -1, -42]) for _ in values]
    flags = [rng.random() < 0.5 for _ in values]
    text, offsets = number_rows([(MS, values), (INT, ints), (INT, flags)])
    rows = [f"{json.dumps(round(v, 3))},{i},{int(f)}," for v, i, f in zip(values, ints, flags, strict=True)]
    assert text == "".join(rows)
    assert [text[a:b] for a, b in itertools.pairwise(offsets)] == rows
    assert number_rows([(MS, []), (INT, [])]) == ("", [0])


def test_span_ns_is_ns_of_each_end_never_before_its_start():
    starts = _tricky_floats()
    ends = [s + random.Random(k).choice([-1e-4, 0.0, 0.0005, 2.5]) for k, s in enumerate(starts)]
    got_starts, got_ends = _span_ns(starts, ends)
    assert got_starts == [_ns(s) for s in starts]
    assert got_ends == [max(_ns(e), _ns(s)) for s, e in zip(starts, ends, strict=True)]
    assert all(type(t) is int for t in got_starts[:10] + got_ends[:10])
