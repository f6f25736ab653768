"""commopt's torch.export.load: the same program as torch's, and torch left as it was."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "sample_graphs" / "corpus" / "ws8"


def _program_text(ep) -> tuple[str, str, list[str]]:
    return (str(ep.graph), str(ep.graph_signature), sorted(ep.state_dict))


def test_the_load_gives_torchs_program_and_restores_the_deserializer():
    import torch
    from torch._export.serde import serialize

    from commopt.io.export_load import load_exported_program

    path = str(CORPUS / "llama_fsdp_bf16.pt2")
    ours = load_exported_program(path)
    assert serialize.typing is typing
    theirs = torch.export.load(path)
    assert _program_text(ours) == _program_text(theirs)
    for name, value in theirs.state_dict.items():
        assert torch.equal(ours.state_dict[name], value), name


def test_a_deserializer_laid_out_otherwise_is_loaded_unchanged(monkeypatch):
    """If torch's deserializer no longer imports ``typing`` as expected, nothing is swapped."""
    from torch._export.serde import serialize

    from commopt.io.export_load import load_exported_program

    other = object()
    monkeypatch.setattr(serialize, "typing", other, raising=False)
    calls = []
    monkeypatch.setattr("torch.export.load", lambda p: calls.append(serialize.typing) or "ep")
    assert load_exported_program("x.pt2") == "ep"
    assert calls == [other] and serialize.typing is other


def test_a_failing_load_restores_the_deserializer(monkeypatch):
    from torch._export.serde import serialize

    from commopt.io.export_load import load_exported_program

    def boom(path):
        assert serialize.typing is not typing
        raise RuntimeError("bad archive")

    monkeypatch.setattr("torch.export.load", boom)
    with pytest.raises(RuntimeError, match="bad archive"):
        load_exported_program("x.pt2")
    assert serialize.typing is typing
