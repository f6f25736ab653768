"""Sanitizing graph names and values before they reach generated code."""

from __future__ import annotations

import pytest

from commopt.codegen.names import clean, comment, identifier, literal


@pytest.mark.parametrize("name", [
    "x", "layer.0.weight", "a b\nc", "__import__('os').system('x')", "ünïcødé", "", "class",
    "'\"", "1abc", "_" * 80,
])
def test_identifier_is_a_valid_name_that_keeps_the_index(name: str) -> None:
    ident = identifier("n", 7, name)
    assert ident.isidentifier()
    assert ident.startswith("n_7")
    assert "(" not in ident and "'" not in ident


def test_clean_keeps_ascii_words_and_bounds_length() -> None:
    assert clean("layer.0.weight") == "layer_0_weight"
    assert clean("__import__('os')") == "import_os"
    assert clean("ünï") == "n"
    assert len(clean("a" * 100)) == 32


def test_literal_renders_values_with_repr_and_rejects_other_types() -> None:
    assert literal("a'\"\n") == repr("a'\"\n")
    assert eval(literal(float("inf"))) == float("inf")  # noqa: S307 - our own literal
    assert literal(None) == "None"
    with pytest.raises(TypeError):
        literal(object())


def test_comment_is_one_printable_line() -> None:
    text = comment("a\nb\r\u2028c\x00" + "z" * 200, limit=40)
    assert "\n" not in text and "\r" not in text and len(text) == 40
    assert all(" " <= ch <= "~" for ch in text)
