"""Which producers write straight into a communication buffer, checked against torch's schemas
(regression: the bf16 FSDP runner called ``aten._to_copy.out(x, dtype=..., out=buf)``, and
``_to_copy.out`` takes no ``dtype``)."""

from __future__ import annotations

import pytest

from commopt.ir.args import Symbol
from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Ref
from commopt.ir.out_variants import WriteMode, out_overload_reason, write_mode


def _node(op: str, args=None, kwargs=None, outputs: int = 1):
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    y = b.input("y", (4, 4))
    i = b.compute("n", op, [x, y], (4, 4), args=args if args is not None else (Ref(x), Ref(y)),
                  kwargs=kwargs)
    node = b.build().nodes[i]
    if outputs != 1:
        node.outputs = node.outputs * outputs
    return node


bf16 = Symbol("dtype", "bfloat16")


@pytest.mark.parametrize("op, args, kwargs, mode", [
    ("aten.mm.default", None, None, WriteMode.OUT),
    ("aten.add.Tensor", None, {"alpha": 2}, WriteMode.OUT),
    # a dtype cast: copy_ into a buffer of the target dtype casts as it copies
    ("aten._to_copy.default", (Ref(0),), {"dtype": bf16}, WriteMode.COPY),
    ("aten._to_copy.default", (Ref(0),), {"dtype": bf16, "layout": None, "device": None,
                                          "pin_memory": None}, WriteMode.COPY),
    ("prims.convert_element_type.default", (Ref(0), bf16), None, WriteMode.COPY),
    # _to_copy.out has no dtype: a cast that is not pure cannot use it
    ("aten._to_copy.default", (Ref(0),), {"dtype": bf16, "non_blocking": True}, None),
    ("aten._to_copy.default", (Ref(0),), {"dtype": bf16,
                                          "memory_format": Symbol("memory_format", "channels_last")}, None),
    # no .out overload at all
    ("aten.view.default", (Ref(0), [16]), None, None),
    # more positional arguments than the .out overload takes
    ("aten.mm.default", (Ref(0), Ref(1), Ref(0)), None, None),
    # a keyword the .out overload does not have
    ("aten.mm.default", None, {"bogus": 1}, None),
    ("not_an_op", None, None, None),
])
def test_write_mode_follows_the_schema(op, args, kwargs, mode):
    assert write_mode(_node(op, args, kwargs)) is mode


def test_the_reason_names_the_argument_that_does_not_fit():
    reason = out_overload_reason(_node("aten._to_copy.default", (Ref(0),), {"dtype": bf16}))
    assert reason == "the .out overload of aten._to_copy.default has no argument 'dtype'"
    assert "no .out overload" in out_overload_reason(_node("aten.view.default", (Ref(0), [16])))


def test_multi_output_producers_never_write_into_a_buffer():
    assert write_mode(_node("aten.mm.default", outputs=2)) is None


def test_a_producer_writes_into_a_buffer_only_of_its_own_dtype_and_shape():
    from commopt.codegen.slots import Slot
    from commopt.ir.graph import TensorMeta

    slot = Slot("b_0", True, "g", 0, 64, dtype="bfloat16", shape=(4, 8))
    assert slot.holds(TensorMeta("bfloat16", (4, 8)))
    assert not slot.holds(TensorMeta("float32", (4, 8)))  # the plan's dtype differs: copy
    assert not slot.holds(TensorMeta("bfloat16", (8, 4)))
