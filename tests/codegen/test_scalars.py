"""Size arithmetic as the runner runs it: the script's function computes what the op does."""

from __future__ import annotations

import operator

import pytest

from commopt.codegen.scalars import SCALAR_NAMES, is_scalar_op, scalar_function
from tests.codegen.conftest import template_module

SCALARS = template_module().SCALARS


@pytest.mark.parametrize("name, fn", [
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
    ("floordiv", operator.floordiv), ("mod", operator.mod), ("ge", operator.ge),
    ("le", operator.le), ("eq", operator.eq), ("lt", operator.lt), ("ne", operator.ne),
])
def test_binary_ops_evaluate_like_python(name, fn):
    op = f"_operator.{name}"
    assert is_scalar_op(op)
    for a, b in ((7, 3), (3, 7), (5, 5)):
        assert SCALARS[scalar_function(op, 2)](a, b) == fn(a, b)


def test_calls_and_unknown_ops():
    assert SCALARS[scalar_function("torch.sym_max", 2)](2, 9) == 9
    assert SCALARS[scalar_function("torch.sym_sum", 1)]([2, 3, 4]) == 9
    assert SCALARS[scalar_function("_operator.neg", 1)](2) == -2
    assert SCALARS[scalar_function("torch.sym_not", 1)](True) is False
    assert scalar_function("_operator.add", 1) is None  # wrong arity: not generated
    assert not is_scalar_op("aten.add.Tensor") and not is_scalar_op("_operator.getitem")


def test_every_name_the_generator_uses_is_in_the_script():
    assert SCALAR_NAMES <= set(SCALARS)
