"""The generated torchrun runner script: one standalone Python file per graph.

    source = generate_runner(graph, order, plan)     # a str, checked before it is returned
    write_runner(graph, order, plan, "out/run_model.py")

The script needs only torch. It sets up once (process groups from the graph's metadata,
arenas from the buffer plan, operations resolved, the plan digest compared across ranks) and
then runs the graph in ``order`` with collectives on the arenas; ``--verify`` compares with
the original order on fresh tensors. The graph is a table of step records, one per node
(``STEPS``), run by a small loop in either order; see ``runner_template.py`` for the
script's shape, the record format and the options.

Inputs: random by default (seeded by ``--seed`` and the rank, each rank's own local shape),
or ``--inputs FILE.pt``: a ``torch.save``'d dict from input name (a .pt2 placeholder name,
or a parameter's/buffer's state-dict key) to tensor; ``{rank}`` in the path selects one file
per rank. ``--dump-outputs`` writes the flat output list the same way.

Modules: :mod:`.names` (sanitizing), :mod:`.spec` (the plain-data :class:`RunnerModel`),
:mod:`.model` (building it: groups, inputs, checks), :mod:`.slots` (the buffer plan's views),
:mod:`.zero_copy` (which producers write into their buffer; :mod:`commopt.ir.out_variants` how),
:mod:`.lowering` (what each node of an order becomes), :mod:`.render` (pasting the model into
the template).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commopt.codegen.model import RunnerModel, build_model
from commopt.codegen.render import checked_source
from commopt.gc_freeze import collector_paused, freeze_long_lived
from commopt.ir.graph import Graph

__all__ = [
    "RunnerModel", "build_model", "generate", "generate_runner", "runner_filename", "write_runner",
]


def generate(graph: Graph, order: list[int] | None = None, plan: Any = None, *,
             backend: str | None = None) -> tuple[RunnerModel, str]:
    """The runner's model and source (see :func:`generate_runner`)."""
    if backend not in (None, "nccl", "gloo"):
        from commopt.errors import OptionError

        raise OptionError(f"backend must be 'nccl' or 'gloo', not {backend!r}", field="backend")
    # millions of small acyclic records, all alive until the source is rendered: a
    # collection while they are built would rescan every one built so far (superlinear),
    # and the first one after would scan them all once unless they are frozen
    with collector_paused():
        model = build_model(graph, list(graph.original_order if order is None else order), plan)
        source = checked_source(model, runner_filename(graph), backend=backend)
        freeze_long_lived()
    return model, source


def generate_runner(graph: Graph, order: list[int] | None = None, plan: Any = None, *,
                    backend: str | None = None) -> str:
    """The runner script's source for ``graph`` run in ``order`` with buffer ``plan``.

    ``order`` defaults to the original order; ``plan`` is a
    :class:`commopt.schemas.buffer_plan.BufferPlan` made for that order (None: no arenas, every
    collective gets fresh tensors). ``backend`` ('nccl' or 'gloo') fixes the script's default
    backend; otherwise it picks nccl when CUDA is present. The source is checked before it is
    returned (:func:`commopt.codegen.render.check_source`: its code compiled, its tables
    checked to be plain data), so a bug here cannot produce a script that does not parse.
    """
    return generate(graph, order, plan, backend=backend)[1]


def runner_filename(graph: Graph) -> str:
    """The default file name of a graph's runner: ``run_<sanitized name>.py``."""
    from commopt.codegen.names import clean

    return f"run_{clean(graph.name) or 'graph'}.py"


def write_runner(graph: Graph, path: str | os.PathLike[str], order: list[int] | None = None,
                 plan: Any = None, *, backend: str | None = None) -> RunnerModel:
    """Generate the runner and write it to ``path`` atomically (executable).

    Returns the model, whose counts (buffers, copies and zero-copy producers per step,
    emulated nodes) callers report.
    """
    from commopt import atomic

    model, source = generate(graph, order, plan, backend=backend)
    with atomic.atomic_path(Path(path)) as tmp:
        tmp.write_text(source, encoding="utf-8")
        tmp.chmod(0o755)
    return model
