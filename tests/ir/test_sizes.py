"""--assume values and the one-line statement of what was assumed."""

from __future__ import annotations

import pytest

from commopt.errors import OptionError
from commopt.ir.sizes import DataDependentSize, describe_assumptions, parse_assumptions


def test_parse_assumptions_reads_symbols_and_the_default():
    assert parse_assumptions(["u2=40", " * = 16"]) == {"u2": 40, "*": 16}
    assert parse_assumptions({"u0": 0}) == {"u0": 0}
    assert parse_assumptions(None) == {}


@pytest.mark.parametrize("item, message", [
    ("u2", "takes SYMBOL=N"),
    ("u2=x", "integer >= 0, got 'x'"),
    ("u2=-1", "integer >= 0, got -1"),
    ("2u=3", "not a symbol name"),
])
def test_parse_assumptions_rejects_bad_items(item, message):
    with pytest.raises(OptionError, match=message):
        parse_assumptions([item])


def test_describe_groups_symbols_sharing_value_and_basis():
    sizes = [DataDependentSize(f"u{k}", 32, "even-split", "", None) for k in range(3)]
    sizes.append(DataDependentSize("u3", 40, "given", "", None))
    assert describe_assumptions(sizes) == "u0, u1, u2 = 32 (even-split); u3 = 40 (given)"
