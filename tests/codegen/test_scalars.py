"""Size arithmetic as the runner writes it: the expression evaluates to what the op computes."""

from __future__ import annotations

import operator

import pytest

from commopt.codegen.scalars import is_scalar_op, scalar_expression


@pytest.mark.parametrize("name, fn", [
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
    ("floordiv", operator.floordiv), ("mod", operator.mod), ("ge", operator.ge),
    ("le", operator.le), ("eq", operator.eq), ("lt", operator.lt), ("ne", operator.ne),
])
def test_binary_ops_evaluate_like_python(name, fn):
    op = f"_operator.{name}"
    assert is_scalar_op(op)
    for a, b in ((7, 3), (3, 7), (5, 5)):
        assert eval(scalar_expression(op, ["a", "b"]), {"a": a, "b": b}) == fn(a, b)  # noqa: S307


def test_calls_and_unknown_ops():
    assert eval(scalar_expression("torch.sym_max", ["a", "b"]), {"a": 2, "b": 9}) == 9  # noqa: S307
    assert eval(scalar_expression("_operator.neg", ["a"]), {"a": 2}) == -2  # noqa: S307
    assert scalar_expression("_operator.add", ["a"]) is None  # wrong arity: not generated
    assert not is_scalar_op("aten.add.Tensor") and not is_scalar_op("_operator.getitem")
