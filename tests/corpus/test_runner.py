"""Every runnable corpus graph: the runner `commopt optimize` generates (default options)
passes ``--verify`` under torchrun on gloo, and its outputs equal the eager archive's.

One torchrun launch per world size runs every graph of that size; inside it a wrapper runs,
per graph, the archive eagerly (tests.distributed) on its own inputs, saves those inputs, then
calls the runner's ``main()`` with ``--inputs`` so both see the same values. A graph whose
runner raises is recorded with its error and the launch goes on to the next graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.codegen.conftest import REPO, torchrun
from tests.corpus.conftest import optimized_dir
from tests.corpus.graphs import CorpusGraph, runnable

pytestmark = pytest.mark.slow

WRAPPER = '''\
import json
import os
import runpy
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, {repo!r})
from tests.distributed import flat_inputs, read_groups_record, recreate_groups, run_exported

rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
status = {{}}
for name, archive, runner in {cases!r}:
    try:
        ep = torch.export.load(archive)
        mapping = recreate_groups(read_groups_record(archive))
        keys = [s.target if s.target else s.arg.name for s in ep.graph_signature.input_specs]
        torch.save(dict(zip(keys, flat_inputs(ep))), f"{{name}}_in{{rank}}.pt")
        torch.save(run_exported(ep, mapping), f"{{name}}_eager{{rank}}.pt")
        main = runpy.run_path(runner, run_name="runner")["main"]
        code = main(["--verify", "--iters", "2", "--warmup", "1", "--inputs", f"{{name}}_in{{{{rank}}}}.pt",
                     "--dump-outputs", f"{{name}}_out{{{{rank}}}}.pt", "--out", f"{{name}}.json"])
        status[name] = "ok" if code == 0 else f"exit {{code}}"
    except Exception as exc:
        status[name] = "".join(traceback.format_exception_only(exc)).strip()
with open(f"status{{rank}}.json", "w") as f:
    json.dump(status, f)
dist.destroy_process_group()
'''

CASES = [g for ws in (2, 4) for g in runnable(ws)]
_LAUNCHED: dict[int, Path] = {}

def _launch(world: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if world not in _LAUNCHED:
        work = tmp_path_factory.mktemp(f"runners_ws{world}")
        cases = []
        for g in runnable(world):
            (runner,) = optimized_dir(g, tmp_path_factory).glob("run_*.py")
            cases.append((g.id, str(g.path), str(runner)))
        wrapper = work / "wrapper.py"
        wrapper.write_text(WRAPPER.format(repo=str(REPO), cases=cases), encoding="utf-8")
        proc = torchrun(wrapper, world, cwd=work, timeout_s=600)
        assert proc.returncode == 0, proc.stderr[-6000:]
        (work / "stderr.txt").write_text(proc.stderr, encoding="utf-8")
        _LAUNCHED[world] = work
    return _LAUNCHED[world]


@pytest.mark.parametrize("graph", [pytest.param(g, id=g.id) for g in CASES])
def test_runner_verifies_and_matches_the_eager_archive(graph: CorpusGraph, tmp_path_factory) -> None:
    work = _launch(graph.world_size, tmp_path_factory)
    for r in range(graph.world_size):
        status = json.loads((work / f"status{r}.json").read_text(encoding="utf-8"))[graph.id]
        assert status == "ok", f"{graph.id} rank {r}: {status}"
    for r in range(graph.world_size):
        eager = torch.load(work / f"{graph.id}_eager{r}.pt")
        got = torch.load(work / f"{graph.id}_out{r}.pt")
        assert len(got) == len(eager), graph.id
        for k, (a, b) in enumerate(zip(got, eager, strict=True)):
            where = f"{graph.id}: rank {r} output {k}"
            if isinstance(b, torch.Tensor):
                assert (a.shape, a.dtype) == (b.shape, b.dtype), where
                assert torch.equal(a, b), f"{where} differs from the eager run"
            else:
                assert a == b, where
    results = json.loads((work / f"{graph.id}.json").read_text(encoding="utf-8"))
    assert results["world_size"] == graph.world_size
