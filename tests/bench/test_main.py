"""``python -m bench --only NAME --update``: only those sections of BENCHMARKS.md change."""

from __future__ import annotations

import pytest

from bench.__main__ import replace_sections

DOC = "# Benchmarks\n\nheader\n\n## A\n\nold a\n\n## B\n\nold b\n\n_bench_b ran in 1.0 s._\n\n## C\n\nold c\n"


def test_a_regenerated_section_replaces_its_own_and_keeps_the_others():
    out = replace_sections(DOC, ["## B\n\nnew b\n\n_bench_b ran in 2.0 s._\n"])
    assert out == DOC.replace("old b\n\n_bench_b ran in 1.0 s._", "new b\n\n_bench_b ran in 2.0 s._")


def test_a_module_of_two_sections_replaces_both_in_place():
    out = replace_sections(DOC, ["## C\n\nnew c\n\n## A\n\nnew a\n"])
    assert out.index("new a") < out.index("old b") < out.index("new c")
    assert "old a" not in out and "old c" not in out and out.endswith("new c\n")


def test_a_section_the_document_lacks_is_refused():
    with pytest.raises(ValueError, match="no section '## D'"):
        replace_sections(DOC, ["## D\n\nd\n"])
