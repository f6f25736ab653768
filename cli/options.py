"""Options shared by several commands, defined once; the output guard and JSON payloads."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from typing import Any

import click
from pydantic import BaseModel

from commopt.cli.app import App, echo
from commopt.errors import CommoptError

graph_argument = click.argument("graph", type=click.Path(dir_okay=True, path_type=str))

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Payload format on stdout.",
)


def group_options(f):
    """--groups FILE, --mesh SPEC and --world-size N: process-group sizes and ranks a .pt2
    archive does not record (see docs/process-groups.md)."""
    f = click.option(
        "--world-size",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Number of ranks in the job; the default process group '0' is the world.",
    )(f)
    f = click.option(
        "--mesh",
        default=None,
        metavar="DIM=SIZE,...",
        help="Device mesh, e.g. dp=2,tp=4 (ranks laid out row-major), to name group ranks.",
    )(f)
    f = click.option(
        "--groups",
        "groups_file",
        default=None,
        type=click.Path(dir_okay=False, path_type=str),
        help="JSON file listing process groups (name, ranks, mesh_dim).",
    )(f)
    return f


def load_graph_for_cli(graph: str, groups_file: str | None = None, mesh: str | None = None,
                       world_size: int | None = None, *, require_sizes: bool = True,
                       echo_warnings: bool = True):
    """Load a graph given on the command line (errors become one-line user errors).

    Every command whose output depends on group sizes (``require_sizes``) refuses a graph
    with a group of unknown size; load warnings go to stderr unless the command shows them
    itself (``echo_warnings=False``), and so does the statement of the values assumed for
    data-dependent sizes (every number the command shows depends on them). The graph is
    kept until the process ends when the end follows the command (:meth:`App.keep_until_exit`).
    """
    from commopt.assumed_sizes import statement
    from commopt.io import load_graph
    from commopt.io.groups import require_known_group_sizes
    from commopt.ir.sizes import data_dependent_sizes

    g = load_graph(graph, groups=groups_file, mesh=mesh, world_size=world_size)
    ctx = click.get_current_context(silent=True)
    app = ctx.find_object(App) if ctx is not None else None
    if app is not None:
        app.keep_until_exit(g)  # freed by the exit, not one object at a time as the command returns
    if require_sizes:
        require_known_group_sizes(g)
    if echo_warnings:
        for w in g.meta.get("load_warnings", []):
            echo(f"warning: {w}", err=True)
        sizes = data_dependent_sizes(g)
        if sizes:
            echo(f"note: {statement(sizes)}", err=True)
    return g


#: Characters JSON may carry raw that a terminal would still act on: DEL and the C1 controls
#: (JSON escapes C0 itself), and lone surrogates.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff]")


def emit_json(app: App, payload: BaseModel | dict[str, Any]) -> None:
    """Write a JSON payload to stdout (a pydantic model is validated by construction).

    Every control character is a ``\\u`` escape, so names from the input cannot act on the
    terminal; the text parses to the same values (see :func:`commopt.cli.app.terminal_safe`).
    """
    if isinstance(payload, BaseModel):
        try:
            text = payload.model_dump_json(indent=2)
        except ValueError:  # a lone surrogate (an undecodable file name) cannot be UTF-8
            text = json.dumps(payload.model_dump(mode="json"), indent=2)
    else:
        text = json.dumps(payload, indent=2, sort_keys=False)
    click.echo(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _check_align(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        from commopt.buffers.planner import check_align

        check_align(value)
    return value


persistent_params_option = click.option(
    "--persistent-params", "persistent_params", default=None, metavar="all|none|GROUP,...",
    help="Keep the parameters that the all_gathers of these process groups read (directly or "
         "through reshaping views, never through a cast) in the arena for the whole step, as "
         "FSDP's flat parameters: copied in once, not every step; costs their bytes in the "
         "arena [default: none].")

def print_persistent_params(out, entry) -> None:
    """Which parameters live in the arena, what they cost and save, and why others do not."""
    groups = ", ".join(entry.groups)
    cost = getattr(entry, "arena_cost_bytes", None)
    grows = f" (the arena grows by {cost / 2**20:,.2f} MiB)" if cost is not None else ""
    out.print(f"persistent parameters (groups {groups}): {len(entry.params)} live in the arena, "
              f"{entry.slot_bytes / 2**20:,.2f} MiB held for the whole step{grows}; "
              f"{entry.copies_saved_per_step} copy-in(s) per step saved "
              f"({entry.bytes_not_copied_per_step:,} B)", markup=False)
    reasons: dict[str, list[str]] = {}
    for r in entry.not_qualified:
        reasons.setdefault(r.reason, []).append(r.param)
    for reason, params in reasons.items():
        shown = ", ".join(params[:4]) + (f" and {len(params) - 4} more" if len(params) > 4 else "")
        out.print(f"  not persistent ({len(params)}): {shown}: {reason}", markup=False)


align_option = click.option(
    "--align", type=int, default=None, metavar="BYTES", callback=_check_align,
    help="Alignment of every buffer offset and size, a power of two up to 2 MiB [default: 512, "
         "the CUDA caching allocator's block granularity].")


def check_outputs(app: App | None, outputs: dict[str, str | os.PathLike[str] | None],
                  inputs: dict[str, str | os.PathLike[str] | None],
                  more_inputs: Iterable[tuple[str, Any]] = (), *, step_summary: bool = False) -> None:
    """Refuse (exit 2, one line naming both) an output that is one of the command's inputs or
    another of its outputs, before anything is written: the shared output guard
    (:func:`commopt.outputs.guard_outputs`) as every command calls it.

    ``outputs`` and ``inputs`` map the option or argument name to its path (None: not given);
    ``more_inputs`` adds (label, path) pairs (e.g. :func:`commopt.outputs.estimator_inputs`).
    A ``.pt2`` graph's groups sidecar and, with ``app``, the configuration file in effect
    count as inputs too. With ``step_summary`` (the command appends to ``$GITHUB_STEP_SUMMARY``)
    that file may not be an input either (it may be one of the outputs: appending is meant).
    """
    from commopt.io.groups import sidecar_path
    from commopt.outputs import guard_outputs

    ins: list[tuple[str, Any]] = []
    for label, path in [*inputs.items(), *more_inputs]:
        if path is None:
            continue
        ins.append((label, path))
        if str(path).lower().endswith(".pt2"):
            ins.append((f"{label} groups sidecar", sidecar_path(path)))
    if app is not None and app.config.file is not None:
        ins.append(("configuration file", app.config.file))
    guard_outputs(list(outputs.items()), ins)
    if step_summary:
        guard_outputs([("$GITHUB_STEP_SUMMARY", os.environ.get("GITHUB_STEP_SUMMARY") or None)], ins)


_pass_app_object = click.make_pass_decorator(App, ensure=True)


def _flag_given(ctx: click.Context, flag: str) -> bool:
    """Whether ``flag`` (e.g. ``--align``) was set on the command line or from the environment."""
    from click.core import ParameterSource

    for param in ctx.command.params:
        if flag in getattr(param, "opts", ()) and param.name is not None:
            return ctx.get_parameter_source(param.name) in (ParameterSource.COMMANDLINE,
                                                            ParameterSource.ENVIRONMENT)
    return False


def pass_app(f):
    """Pass the :class:`App` as the command's first argument, and re-locate an error about a
    value from the configuration file at that file and key (:func:`commopt.config.relabel_error`):
    library code names the flag, which the user did not pass when the value came from the file."""
    inner = _pass_app_object(f)

    @functools.wraps(inner)
    def command(*args, **kwargs):
        try:
            return inner(*args, **kwargs)
        except CommoptError as exc:
            ctx = click.get_current_context()
            app = ctx.find_object(App)
            config = app._config if app is not None else None  # not App.config: never read it here
            if config is None:  # the command never read the configuration: no value came from it
                raise
            from commopt.config import relabel_error

            new = relabel_error(exc, config, lambda flag: _flag_given(ctx, flag))
            if new is exc:
                raise
            raise new from exc

    return command
