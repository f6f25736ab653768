"""The runner of a graph with data-dependent sizes never uses the assumed values: optimized
with deliberately wrong assumptions (1 row per split), the runners of the dropless MoE corpus
graphs (qwen3_moe_ep, deepseek_v3_ep) still pass ``--verify`` on 2 gloo ranks and their
outputs equal the eager archive's bitwise; every size comes from the step's own ``.tolist()``
values."""

from __future__ import annotations

import json

import pytest
import torch

import commopt
from tests.codegen.conftest import launch_runners, script_table
from tests.corpus.graphs import CORPUS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["qwen3_moe_ep", "deepseek_v3_ep"])
def test_runner_computes_sizes_at_run_time_whatever_was_assumed(name, tmp_path):
    graph = CORPUS / "ws2" / f"{name}.pt2"
    out = tmp_path / "opt"
    result = commopt.optimize(graph, output_dir=out, assume=["*=1"], timings=False)
    assert {s.assumed for s in result.summary.data_dependent.sizes} == {1}
    (runner,) = out.glob("run_*.py")
    source = runner.read_text()
    # the token all_to_alls are sized when the step runs (shape None), from split sizes the
    # step computed (references to its own values), not from the assumed ones
    all_to_all = [r for r in script_table(source) if r[2] == "collective" and r[4] == "all_to_all"]
    sized = [r for r in all_to_all if all(t[6] is None for t in r[8])]
    assert sized and all('{"v": ' in json.dumps(r[9][0]) for r in sized)
    status = launch_runners([("g", str(graph), str(runner))], 2, tmp_path)
    assert status["g"] == ["ok", "ok"]
    for r in range(2):
        eager = torch.load(tmp_path / f"g_eager{r}.pt")
        got = torch.load(tmp_path / f"g_out{r}.pt")
        assert len(got) == len(eager)
        for a, b in zip(got, eager, strict=True):
            assert torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b
