"""The shipped snapshot of torch's operator registry answers as torch does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from commopt.ir import op_registry
from commopt.ir.op_registry import (
    installed_torch_version,
    overload_names,
    overload_schema,
    snapshot_path,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def _shipped() -> dict:
    version = installed_torch_version()
    if version is None or not snapshot_path(version).is_file():
        pytest.skip(f"no registry snapshot for torch {version}: `python -m commopt.ir.op_registry` "
                    "writes one")
    return op_registry._load_snapshot(version)


def test_the_installed_version_is_read_without_importing_torch():
    code = ("import sys; from commopt.ir.op_registry import installed_torch_version; "
            "v = installed_torch_version(); import torch; print(v == torch.__version__, "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.slow
def test_the_shipped_snapshot_is_a_fresh_torchs_registry():
    """Written again from a fresh ``import torch``, byte for byte."""
    _shipped()
    code = ("import sys; from commopt.ir.op_registry import registry_snapshot, snapshot_bytes; "
            "sys.stdout.buffer.write(snapshot_bytes(registry_snapshot()))")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert fresh == snapshot_path(installed_torch_version()).read_bytes()


def test_snapshot_answers_are_torchs_answers():
    """Every op's overloads, and the schemas the runner compares (each op's ``out`` and the
    overloads of ops that have one), as ``torch.ops`` gives them in this process."""
    import torch

    ops = _shipped()
    assert "torch" in sys.modules  # so the functions below ask torch itself
    checked = 0
    for op, overloads in ops.items():
        assert tuple(overloads) == overload_names(op), op
        if "out" in overloads:
            for overload in overloads:
                shipped = overloads[overload]
                assert (None if shipped is None else tuple(map(tuple, shipped))) \
                    == overload_schema(op, overload), (op, overload)
                checked += 1
    assert checked > 1000
    assert overload_names("aten.no_such_op") is None and "aten.no_such_op" not in ops
    assert overload_names("operator.getitem") is None and "operator.getitem" not in ops
    assert overload_schema("aten.mm", "no_such_overload") is None
    assert torch.ops.aten.mm.out._schema.arguments[-1].name == "out"


def test_a_json_graph_is_optimized_and_written_without_importing_torch(tmp_path):
    """The snapshot's point: a fresh process optimizing a JSON graph of matmuls, every output
    written (buffer plan, runner, reports), never imports torch (1.5 s, 170 MB)."""
    _shipped()
    code = ("import sys; from commopt import api; "
            f"api.optimize({str(SAMPLES / 'ws8' / 'fsdp.json')!r}, output_dir={str(tmp_path)!r}); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / "buffer_plan.json").is_file() and (tmp_path / "report.html").is_file()
