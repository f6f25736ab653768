"""Fixtures of the runner-script tests: small graphs, golden files, torchrun launches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph, Ref

GOLDEN = Path(__file__).resolve().parent / "golden"
REPO = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/codegen/golden/* from the current generator")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are rewritten instead of compared."""
    return bool(request.config.getoption("--update-golden", default=False))


def tiny_graph() -> Graph:
    """mm -> relu -> all_reduce and an all_gather of the mm, an emulated node, two outputs."""
    b = GraphBuilder(name="tiny", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (4, 8))
    w = b.input("w", (8, 8), role="parameter")
    y = b.compute("y", "aten.mm.default", [x, w], (4, 8))
    r = b.compute("r", "aten.relu.default", [y], (4, 8))
    ar = b.collective("ar", "all_reduce", "0", r)
    ag = b.collective("ag", "all_gather", "0", y)
    z = b.compute("z", "aten.relu.default", [x], (4, 8))
    ar_w = b.wait("ar_wait", ar)
    ag_w = b.wait("ag_wait", ag)
    e = b.compute("emu", "fancy_kernel", [ar_w], (4, 8), duration_us=20.0)
    s = b.compute("s", "aten.add.Tensor", [e, z], (4, 8))
    b.output([s, ag_w])
    return b.build()


def regather_graph() -> Graph:
    """SimpleFSDP's re-gather in miniature: parameter ``w`` all_gathered in the forward and
    again (through another view) in the backward; the activation ``r`` read by a
    reduce_scatter and an all_gather. Both pairs read one unwritten content."""
    b = GraphBuilder(name="regather", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (8, 8))
    w = b.input("w", (4, 8), role="parameter")
    ag1 = b.collective("ag1", "all_gather", "0", b.view("wv", w, (32,)))
    a = b.compute("a", "aten.relu.default", [x], (8, 8))
    g1 = b.view("g1v", b.wait("ag1_w", ag1), (8, 8))
    y = b.compute("y", "aten.mm.default", [a, g1], (8, 8))
    r = b.compute("r", "aten.relu.default", [y], (8, 8))
    rs1 = b.collective("rs1", "reduce_scatter", "0", r)
    ag3 = b.collective("ag3", "all_gather", "0", r)
    ag2 = b.collective("ag2", "all_gather", "0", b.view("wv2", w, (32,)))
    s1, g3 = b.wait("rs1_w", rs1), b.wait("ag3_w", ag3)
    g2 = b.view("g2v", b.wait("ag2_w", ag2), (8, 8))
    z = b.compute("z", "aten.mm.default", [y, g2], (8, 8))
    b.output([z, s1, g3])
    return b.build()


#: An order of tiny_graph that issues both collectives before the independent relu.
TINY_ORDER = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
TINY_REORDERED = [0, 1, 2, 3, 6, 4, 5, 7, 8, 9, 10, 11]


def torchrun(script: Path, nproc: int, *args: str, cwd: Path,
             timeout_s: float = 240.0) -> subprocess.CompletedProcess[str]:
    """Start ``script`` with ``python -m torch.distributed.run`` on ``nproc`` local ranks."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0",
           str(script), *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)


#: Runs, per case, a .pt2 archive eagerly (tests.distributed) on its own inputs, saves those
#: inputs and its outputs, runs the case's reordered archive (if it names one) eagerly on its
#: own saved inputs and saves its outputs, then the generated runner's main() on the same inputs
#: with --verify and --memory (measured peak bytes per rank in the --out JSON); records each
#: case's status in status<rank>.json (a runner that raises does not stop the others).
#: Teardown: every process-group object is released and all ranks meet in a barrier before
#: the world is destroyed, so no rank closes its connections while a peer still uses them
#: (without it, one run in four aborted at exit with "terminate called without an active
#: exception").
RUNNER_WRAPPER = '''\
import gc
import json
import os
import runpy
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, {repo!r})
from tests.distributed import (flat_inputs, load_archive, read_groups_record, recreate_groups,
                               run_exported, use_gloo_worker_threads)

rank = int(os.environ["RANK"])
use_gloo_worker_threads()  # as run_gloo: one worker thread per gloo group
dist.init_process_group("gloo")
status = {{}}
for name, archive, runner, *reordered in {cases!r}:
    try:
        ep = load_archive(archive)
        mapping = recreate_groups(read_groups_record(archive))
        # parameters and buffers by state-dict key, user inputs by placeholder name
        keys = [s.target if s.target else s.arg.name for s in ep.graph_signature.input_specs]
        torch.save(dict(zip(keys, flat_inputs(ep))), f"{{name}}_in{{rank}}.pt")
        torch.save(run_exported(ep, mapping), f"{{name}}_eager{{rank}}.pt")
        for path in reordered:  # on the inputs and state dict saved in that archive
            torch.save(run_exported(load_archive(path), mapping), f"{{name}}_reordered{{rank}}.pt")
        main = runpy.run_path(runner, run_name="runner")["main"]
        code = main(["--verify", "--memory", "--iters", "2", "--warmup", "1", "--inputs", f"{{name}}_in{{{{rank}}}}.pt",
                     "--dump-outputs", f"{{name}}_out{{{{rank}}}}.pt", "--out", f"{{name}}.json"])
        status[name] = "ok" if code == 0 else f"exit {{code}}"
    except Exception as exc:
        status[name] = "".join(traceback.format_exception_only(exc)).strip()
    finally:
        ep = mapping = main = None
with open(f"status{{rank}}.json", "w") as f:
    json.dump(status, f)
gc.collect()
dist.barrier()
dist.destroy_process_group()
'''


def launch_runners(cases: list[tuple[str, ...]], world: int, work: Path) -> dict[str, list[str]]:
    """Run ``(name, archive, runner[, reordered archive])`` cases in one torchrun launch of
    ``world`` ranks in ``work`` (see :data:`RUNNER_WRAPPER`); returns each case's status per
    rank ("ok" or the error). Outputs land in ``work``: ``<name>_eager<rank>.pt``,
    ``<name>_reordered<rank>.pt`` (with a reordered archive), ``<name>_out<rank>.pt``."""
    import json

    wrapper = work / "wrapper.py"
    wrapper.write_text(RUNNER_WRAPPER.format(repo=str(REPO), cases=cases), encoding="utf-8")
    proc = torchrun(wrapper, world, cwd=work, timeout_s=600)
    (work / "stderr.txt").write_text(proc.stderr, encoding="utf-8")
    assert proc.returncode == 0, proc.stderr[-6000:]
    ranks = [json.loads((work / f"status{r}.json").read_text(encoding="utf-8")) for r in range(world)]
    return {name: [r[name] for r in ranks] for name, *_ in cases}


def template_module():
    """The runner template loaded as a module (its step interpreter and tables; main() is
    not run): what every generated script's fixed code is."""
    import importlib.util

    path = REPO / "commopt" / "codegen" / "runner_template.py"
    spec = importlib.util.spec_from_file_location("commopt_runner_template", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def script_table(source: str, name: str = "STEPS") -> list:
    """A JSON table (``STEPS``, ``OPTIMIZED_ORDER``, ``INPUTS``, ``BUFFERS``) read back from a
    generated script's text."""
    import json

    start = source.index(f"\n{name} = json.loads(r'''") + len(f"\n{name} = json.loads(r'''")
    return json.loads(source[start:source.index("''')", start)])


def views_graph() -> Graph:
    """SimpleFSDP's reduce_scatter of view(t(t(mm))) and TP's all_reduce of view(mm), and a
    reduce_scatter of a transposed mm (its bytes are not in order)."""
    b = GraphBuilder(name="views", world_size=2)
    b.group("0", ranks=[0, 1])
    x, w = b.input("x", (4, 8)), b.input("w", (8, 8))
    mm = b.compute("mm", "aten.mm.default", [x, w], (4, 8))
    t1 = b.view("t1", mm, (8, 4), op="aten.t.default", args=(Ref(mm),))
    t2 = b.view("t2", t1, (4, 8), op="aten.t.default", args=(Ref(t1),))
    flat = b.view("flat", t2, (32,), args=(Ref(t2), [32]))
    rs = b.wait("rs_wait", b.collective("rs", "reduce_scatter", "0", flat))
    mm2 = b.compute("mm2", "aten.mm.default", [x, w], (4, 8))
    v2 = b.view("v2", mm2, (2, 16), args=(Ref(mm2), [2, 16]))
    ar = b.wait("ar_wait", b.collective("ar", "all_reduce", "0", v2))
    mm3 = b.compute("mm3", "aten.mm.default", [x, w], (4, 8))
    t3 = b.view("t3", mm3, (8, 4), op="aten.t.default", args=(Ref(mm3),))
    rs3 = b.wait("rs3_wait", b.collective("rs3", "reduce_scatter", "0", t3))
    b.output([rs, ar, rs3])
    return b.build()
