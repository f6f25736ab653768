"""Everything ``commopt optimize`` writes into its output directory, from one optimize result;
and the output guard every command that writes a file goes through.

Two steps, each done once: :func:`build_outputs` makes every artifact in memory from the
result and explicit :class:`OutputOptions` (the buffer plan, the runner's source, the report,
the final summary); :func:`write_outputs` writes them. Neither changes the result.

The files, in writing order: the reordered graph (the input's format), ``buffer_plan.json``,
the runner script ``run_<name>.py``, ``report.html``, ``trace.json``, ``summary.json`` and,
last, ``manifest.json`` (:class:`~commopt.schemas.manifest.Manifest`), which names every
other file with its size and SHA-256. A run first moves the previous manifest aside (to
:data:`PREVIOUS_MANIFEST_FILE`), so a directory holds a complete set exactly when it has a
manifest and every file it lists has the listed digest (:func:`incomplete_files`). Every file goes through :mod:`commopt.atomic`,
so a run killed at any point leaves each file either complete (old or new) or absent, never
partial. Outputs are deterministic except the wall times in ``summary.json`` (left out with
``timings=False``) and, through its digest, the manifest.

:func:`guard_outputs` refuses an output that is an input or another output of the same
command, before anything is written; every command that writes files calls it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from commopt.errors import GraphError, OptionError, OutputError
from commopt.progress import SILENT, Progress
from commopt.result import OptimizeResult, OutputOptions, Outputs
from commopt.schemas.manifest import Manifest, ManifestFile

if TYPE_CHECKING:
    from commopt.forked import RenderJob
    from commopt.ir.graph import Graph
    from commopt.schemas.buffer_plan import BufferPlan, PlanComparison
    from commopt.schemas.report import OverlapReport

#: A file path as the functions here take it.
PathLike = str | os.PathLike

SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
#: Where a run keeps the previous manifest until its own is written: the list of the earlier
#: set's files survives a killed run, so the next run can still remove the stale ones. It is
#: not a manifest (only ``manifest.json`` marks a complete set).
PREVIOUS_MANIFEST_FILE = ".manifest.previous.json"
#: The names a run is about to write, recorded before it writes any: the files of a run that
#: was killed before its manifest are still known as commopt's (not the user's) to the next.
PENDING_FILE = ".manifest.pending.json"
PLAN_FILE = "buffer_plan.json"
REPORT_HTML = "report.html"
TRACE_FILE = "trace.json"


#: The output options when none are given: default alignment, buffers for every collective.
DEFAULT_OUTPUT_OPTIONS = OutputOptions()


def build_outputs(result: OptimizeResult, options: OutputOptions = DEFAULT_OUTPUT_OPTIONS, *,
                  progress: Progress = SILENT) -> Outputs:
    """Plan buffers on the optimized order, generate the runner and build the report.

    The summary of the outputs is the result's summary with the buffer-plan totals (and the
    arena the original order would need), the runner's note and the list of files added;
    ``result`` itself is not changed, so building twice gives equal outputs.
    """
    return _build_outputs(result, options, progress)[0]


def _build_outputs(result: OptimizeResult, options: OutputOptions, progress: Progress,
                   output_dir: Path | None = None, jobs: int = 1,
                   original_totals: Callable[[], tuple[int, int]] | None = None,
                   planning: RenderJob | None = None,
                   ) -> tuple[Outputs, dict[str, tuple[RenderJob, int]]]:
    """:func:`build_outputs`, and the jobs rendering output files in forked children when
    there are any (by file name: the job and which of its files): with ``output_dir`` given,
    ``jobs`` >= 2 and a large graph (:func:`commopt.forked.worth_forking`). Then one child
    plans the buffers, renders ``buffer_plan.json`` and the runner (``planning``, when the
    caller started it already: :func:`start_planning`), while this process builds the
    report and renders the JSON graph, the report's timelines and the Chrome trace;
    ``report.html`` (which shows the runner's footprint) is rendered here
    once the first child has reported. The plan and the runner's source are then made in this
    process only if a caller reads them (:class:`~commopt.result.Deferred`). Without children
    the report comes after the runner, whose temporaries are gone by then (a lower peak), and
    :func:`write_outputs` renders every file itself. ``original_totals``: the original
    order's arena totals when something already computes them (the optimize call's own
    child, :func:`commopt.api.optimize`), else they are packed here."""
    from commopt.forked import RenderJob
    from commopt.report import build_report
    from commopt.result import Deferred

    g = result.graph
    g0 = result.before_graph
    order = list(result.order)

    def built_report(footprint=None) -> OverlapReport:
        with progress.stage("build report"):
            return build_report(
                g, g0.original_order, result.order, list(result.durations_us),
                before_graph=g0, before_durations_us=result.before_durations_us,
                estimator_name=result.estimator,
                before_sim=result.pipeline.initial, after_sim=result.pipeline.final,
                memory_budget_bytes=result.summary.memory_budget_bytes, notes=result.summary.notes,
                certificate=result.summary.certificate,
                data_dependent=result.summary.data_dependent,
                footprint=footprint, robustness=result.summary.robustness,
            )

    if planning is None and output_dir is not None:
        planning = start_planning(g, order, g0, options, output_dir, original_totals, jobs, progress)
    rendering: dict[str, tuple[RenderJob, int]] = {}
    report = None
    try:
        notes = list(result.summary.notes)
        if planning is not None:
            from commopt.report import timeline_data

            assert output_dir is not None
            rendering[PLAN_FILE] = (planning, 0)
            report = built_report()
            graph_file = result.summary.output
            if Path(graph_file).suffix.lower() != ".pt2":  # a JSON graph: rendered while the runner is
                with progress.stage("render graph"):
                    rendering[graph_file] = (RenderJob(
                        lambda fh: _render_json_graph(g, order, fh, output_dir / graph_file),
                        output_dir, fork=False), 0)
            with progress.stage("render report.html timelines"):  # the part the runner's figures leave alone
                timelines = timeline_data(report)
            # here, not in a child of its own: the planning child takes about as long as this
            # process's work with the trace, and a third process would only share two cores
            with progress.stage("render trace.json"):
                rendering[TRACE_FILE] = (RenderJob(
                    lambda fh: _render_trace(report, fh, output_dir / TRACE_FILE), output_dir,
                    fork=False), 0)
            with progress.stage("wait for the forked runner"):
                runner_name, note, predicted, comparison = planning.value()
            if runner_name is not None:
                rendering[runner_name] = (planning, 1)
            deferred_plan = Deferred(lambda: _plan_of(g, order, options))
            deferred_source = Deferred(lambda: _runner(g, order, deferred_plan.get())[1])
        else:
            with progress.stage("plan buffers"):
                plan = _plan_of(g, order, options)
            with progress.stage("generate runner"):
                runner_name, runner_source, note, predicted = _runner(g, order, plan)
            with progress.stage("plan buffers (original order)"):
                totals = original_totals() if original_totals is not None else _original_totals(g0, options)
            with progress.stage("plan buffers (comparison)"):
                comparison = _comparison(g, order, g0, options, plan, totals)
            deferred_plan = Deferred.made(plan)
            deferred_source = Deferred.made(runner_source)
        notes.append(note)
        footprint = result.summary.footprint
        if footprint is not None and predicted is not None:  # the runner's exact figure
            footprint = footprint.model_copy(update={"after_bytes": predicted,
                                                     "arena_after_bytes": comparison.arena_bytes})
        if report is None:
            report = built_report(footprint)
        else:  # built before the runner reported, for the timelines and the trace
            if footprint is not None:
                report = report.model_copy(update={"footprint": footprint})
            with progress.stage("render report.html"):
                rendering[REPORT_HTML] = (RenderJob(
                    lambda fh: _render_html(report, fh, output_dir / REPORT_HTML, timelines), output_dir,
                    fork=False), 0)
    except BaseException:
        if planning is not None:
            planning.cancel()
        for job, _ in rendering.values():
            job.cancel()
        raise
    files = [result.summary.output, PLAN_FILE, *([runner_name] if runner_name else []),
             REPORT_HTML, TRACE_FILE, SUMMARY_FILE]
    summary = result.summary.model_copy(deep=True, update={
        "buffer_plan": comparison, "notes": notes, "outputs": files, "footprint": footprint})
    outputs = Outputs(summary=summary, graph_file=result.summary.output, deferred_plan=deferred_plan,
                      runner_name=runner_name, deferred_runner_source=deferred_source, report=report)
    return outputs, rendering


def start_planning(graph: Graph, order: Sequence[int], before_graph: Graph, options: OutputOptions,
                   output_dir: str | os.PathLike[str],
                   original_totals: Callable[[], tuple[int, int]] | None = None,
                   jobs: int = 2, progress: Progress = SILENT) -> RenderJob | None:
    """A forked child that plans the buffers of ``graph`` run in ``order``, compares the plan
    with planning ``before_graph``'s original order (``original_totals``, when something
    computes them already, is asked here before the child starts, else the child packs them)
    and generates the runner (its file 1) while a child of its own renders
    ``buffer_plan.json`` (its file 0); it reports a :class:`_PlannedRunner`. None where forking does not pay
    (:func:`commopt.forked.worth_forking`). It needs only the final order: the optimize call
    starts it before it computes the summary (:func:`commopt.api.optimize`)."""
    from commopt.forked import RenderJob, compute_beside, worth_forking

    if not worth_forking(len(graph), jobs):
        return None
    out = Path(output_dir)
    order = list(order)

    def plan_and_runner(plan_fh: IO[bytes], runner_fh: IO[bytes]) -> _PlannedRunner:
        plan = _plan_of(graph, order, options)

        def plan_file() -> None:
            _render_plan(plan, plan_fh, out / PLAN_FILE)
            plan_fh.flush()

        plan_job = compute_beside(plan_file)  # a child of its own: the runner takes longer
        try:
            comparison = _comparison(graph, order, before_graph, options, plan, totals)
            runner = _render_runner(graph, order, plan, runner_fh)
            plan_job.value()
        finally:
            plan_job.cancel()
        return _PlannedRunner(*runner, comparison)

    with progress.stage("plan buffers and generate runner (forked)"):
        totals = original_totals() if original_totals is not None else None
        return RenderJob(plan_and_runner, out, fork=True, files=2)


def _plan_of(graph: Graph, order: list[int], options: OutputOptions) -> BufferPlan:
    """The buffer plan of ``graph`` run in ``order`` with ``options``."""
    from commopt.buffers import plan_buffers

    return plan_buffers(graph, order, align=_align(options), collective_types=options.comm_buffers,
                        persistent_params=options.persistent_params)


def _comparison(graph: Graph, order: list[int], before_graph: Graph, options: OutputOptions,
                plan: BufferPlan, original_totals: tuple[int, int] | None) -> PlanComparison:
    """``plan`` (of ``graph`` in ``order``) compared with planning ``before_graph``'s original
    order (``original_totals``, or packed here when None)."""
    from commopt.buffers import compare_plans

    return compare_plans(graph, before_graph.original_order, order, align=_align(options),
                         collective_types=options.comm_buffers, new_plan=plan,
                         persistent_params=options.persistent_params,
                         original_graph=before_graph, original_totals=original_totals)


def _original_totals(before_graph: Graph, options: OutputOptions) -> tuple[int, int]:
    """(arena bytes, lower bound bytes) of planning ``before_graph``'s original order."""
    from commopt.buffers.planner import original_arena_totals

    return original_arena_totals(before_graph, before_graph.original_order, align=_align(options),
                                 collective_types=options.comm_buffers,
                                 persistent_params=options.persistent_params)


def _align(options: OutputOptions) -> int:
    """The buffer alignment ``options`` ask for."""
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES

    return DEFAULT_ALIGN_BYTES if options.align is None else options.align


class _PlannedRunner(NamedTuple):
    """What the child that plans the buffers and generates the runner reports: the runner's
    file name, summary note and predicted peak (see :func:`_runner`; no name: no runner),
    and the plan's comparison with the original order's."""

    runner_name: str | None
    note: str
    predicted: int | None
    comparison: PlanComparison


def build_and_write_outputs(result: OptimizeResult, options: OutputOptions,
                            output_dir: str | os.PathLike[str], *,
                            inputs: Iterable[tuple[str, PathLike | None]] = (),
                            force: bool = False, jobs: int = 1,
                            original_totals: Callable[[], tuple[int, int]] | None = None,
                            planning: RenderJob | None = None,
                            progress: Progress = SILENT) -> tuple[Outputs, tuple[Path, ...]]:
    """:func:`build_outputs` then :func:`write_outputs`, the same files byte for byte. With
    ``jobs`` >= 2, on a large graph, the buffers are planned and the runner generated by a
    forked child on another core (``planning``, when the caller started it already with
    :func:`start_planning` for this result and options and output directory) while this
    process builds the report and renders the other files (:mod:`commopt.forked`).
    ``original_totals`` returns the original order's arena totals when the caller already
    has them computed (else they are packed here)."""
    outputs, rendering = _build_outputs(result, options, progress, output_dir=Path(output_dir),
                                        jobs=jobs, original_totals=original_totals,
                                        planning=planning)
    try:
        written = write_outputs(result, outputs, output_dir, inputs=inputs, force=force,
                                progress=progress, rendered=rendering)
    finally:
        for job, _ in rendering.values():
            job.cancel()
    return outputs, written


def _runner(graph, order: list[int], plan) -> tuple[str | None, str | None, str, int | None]:
    """(file name, source, summary note, predicted peak bytes) of the runner, or no runner
    and the reason."""
    from commopt.codegen import generate, runner_filename

    try:
        model, source = generate(graph, order, plan)
    except GraphError as exc:  # an op the runner cannot launch (e.g. send/recv)
        return None, None, f"runner not generated: {exc}", None
    return runner_filename(graph), source, _runner_note(model), model.predicted_peak_bytes


def _render_runner(graph, order: list[int], plan, fh: IO[bytes]) -> tuple[str | None, str, int | None]:
    """The runner's source written into the open binary file ``fh`` (UTF-8; nothing when no
    runner is generated), and its (file name, summary note, predicted peak bytes)."""
    name, source, note, predicted = _runner(graph, order, plan)
    if source is not None:
        fh.write(source.encode("utf-8"))
    return name, note, predicted


def write_outputs(result: OptimizeResult, outputs: Outputs, output_dir: str | os.PathLike[str], *,
                  inputs: Iterable[tuple[str, PathLike | None]] = (),
                  force: bool = False, progress: Progress = SILENT,
                  rendered: Mapping[str, tuple[RenderJob, int]] | None = None) -> tuple[Path, ...]:
    """Write the output set into ``output_dir``; returns the paths in writing order
    (``manifest.json`` last).

    ``result`` provides the graph and order the reordered graph file is written from.
    ``inputs`` (label, path) are files the run read besides the graph (groups, profile,
    table, ...): no output may be one of them (:func:`guard_outputs`), checked before
    anything is written, and the directory may hold only files commopt wrote unless
    ``force`` (:func:`check_output_dir`). An earlier run's manifest is moved aside first, then the files it
    listed that this run does not write are removed (only when they still have the digest it
    recorded), and temporary files a killed commopt left; the new manifest is written last.
    ``rendered``: files already rendered by :func:`_build_outputs`'s jobs (by name: the job
    and which of its files), copied instead of rendered here.
    """
    from commopt import atomic
    from commopt.buffers import save_plan
    from commopt.io import save_graph
    from commopt.report import write_html, write_trace

    out = Path(output_dir)
    g = result.graph
    rendered = rendered or {}
    has_plan = PLAN_FILE in rendered or outputs.plan is not None
    names = [outputs.graph_file, *([PLAN_FILE] if has_plan else []),
             *([outputs.runner_name] if outputs.runner_name is not None else []),
             *([REPORT_HTML, TRACE_FILE] if outputs.report is not None else []),
             SUMMARY_FILE, MANIFEST_FILE]
    _refuse_graph_file_clash(outputs.graph_file, [*names[1:], PREVIOUS_MANIFEST_FILE, PENDING_FILE], out)
    all_inputs = [("GRAPH", g.source_path), *inputs]
    check_output_dir(out, [*names, PREVIOUS_MANIFEST_FILE, PENDING_FILE], inputs=all_inputs, force=force)
    with atomic.write_errors(out):
        out.mkdir(parents=True, exist_ok=True)
    _retire_previous_set(out, set(names), all_inputs)
    pending = sorted({*names, *_pending_names(out)})  # a killed run's names stay known
    atomic.write_text(out / PENDING_FILE, json.dumps({"format": "commopt-pending", "files": pending}) + "\n")
    written: list[Path] = []

    def copied(name: str, mode: int | None = None) -> bool:
        """Whether ``name`` was rendered already, and then copied into place."""
        if name not in rendered:
            return False
        job, index = rendered[name]
        atomic.write_from(out / name, job.file(index), mode=mode)
        return True

    with progress.stage("write graph"):
        if not copied(outputs.graph_file):
            save_graph(g, out / outputs.graph_file, list(result.order))
        written.append(out / outputs.graph_file)
    if has_plan:
        with progress.stage("write buffer plan"):
            if not copied(PLAN_FILE):
                save_plan(outputs.plan, out / PLAN_FILE)
            written.append(out / PLAN_FILE)
    if outputs.runner_name is not None:
        path = out / outputs.runner_name
        with progress.stage("write runner"):
            if not copied(outputs.runner_name, mode=0o755):
                with atomic.atomic_path(path) as tmp:
                    tmp.write_text(outputs.runner_source, encoding="utf-8")
                    tmp.chmod(0o755)
        written.append(path)
    if outputs.report is not None:
        with progress.stage("write reports"):
            for name, write in ((REPORT_HTML, write_html), (TRACE_FILE, write_trace)):
                if not copied(name):
                    write(outputs.report, out / name)
            written += [out / REPORT_HTML, out / TRACE_FILE]
    with progress.stage("write summary and manifest"):
        summary_path = out / SUMMARY_FILE
        atomic.write_text(summary_path, outputs.summary.model_dump_json(indent=2) + "\n")
        written.append(summary_path)
        manifest_path = out / MANIFEST_FILE
        with atomic.write_errors(manifest_path):
            manifest = build_manifest(written)
        atomic.write_text(manifest_path, manifest.model_dump_json(indent=2) + "\n")
        written.append(manifest_path)
    for name in (PREVIOUS_MANIFEST_FILE, PENDING_FILE):
        with atomic.write_errors(out / name), contextlib.suppress(FileNotFoundError):
            (out / name).unlink()
    return tuple(written)


def _render_plan(plan: BufferPlan, fh: IO[bytes], path: Path) -> None:
    """``buffer_plan.json`` of ``plan`` written into the open binary file ``fh``, as
    :func:`commopt.buffers.save_plan` writes it to ``path``."""
    from commopt import atomic
    from commopt.buffers.planfile import plan_chunks

    with atomic.write_errors(path):
        fh.writelines(chunk.encode("utf-8") for chunk in plan_chunks(plan))


def _render_json_graph(graph, order: list[int], fh: IO[bytes], path: Path) -> None:
    """The reordered graph as :func:`commopt.io.save_graph` writes it to the JSON ``path``,
    written into the open binary file ``fh``."""
    from commopt import atomic
    from commopt.io.json_graph import json_graph_chunks

    with atomic.write_errors(path):
        fh.writelines(chunk.encode("utf-8") for chunk in json_graph_chunks(graph, order))


def _render_html(report: OverlapReport, fh: IO[bytes], path: Path, timelines: str) -> None:
    """``report.html`` of ``report`` written into the open binary file ``fh``, as
    :func:`commopt.report.write_html` writes it to ``path`` (``timelines``: the report's
    :func:`~commopt.report.html.timeline_data`, rendered earlier)."""
    from commopt import atomic
    from commopt.report.html import html_chunks

    with atomic.write_errors(path):
        fh.writelines(chunk.encode("utf-8") for chunk in html_chunks(report, timelines))


def _render_trace(report: OverlapReport, fh: IO[bytes], path: Path) -> None:
    """The trace file of ``report`` written into the open binary file ``fh`` (UTF-8), as
    :func:`commopt.report.write_trace` writes it to ``path``."""
    from commopt import atomic
    from commopt.report.trace import trace_chunks

    with atomic.write_errors(path):  # e.g. the disk filled up
        fh.writelines(chunk.encode("utf-8") for chunk in trace_chunks(report))


def _pending_names(output_dir: Path) -> list[str]:
    """The names in the directory's :data:`PENDING_FILE` ([] when there is none or it is not
    one commopt wrote)."""
    try:
        doc = json.loads(Path(output_dir, PENDING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    files = doc.get("files") if isinstance(doc, dict) and doc.get("format") == "commopt-pending" else None
    return [f for f in files if isinstance(f, str) and _plain_name(f)] if isinstance(files, list) else []


def file_entry(path: str | os.PathLike[str]) -> ManifestFile:
    """The manifest entry of a file as it is on disk: its name, size and SHA-256."""
    import hashlib

    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return ManifestFile(name=Path(path).name, bytes=size, sha256=digest.hexdigest())


def build_manifest(paths: Iterable[str | os.PathLike[str]]) -> Manifest:
    """The manifest of the files ``paths`` (all in one directory), read back from disk."""
    return Manifest(files=[file_entry(p) for p in paths])


def read_manifest(output_dir: str | os.PathLike[str], name: str = MANIFEST_FILE) -> Manifest | None:
    """The manifest in ``output_dir``, or None when there is none or it is not a commopt
    manifest (a directory without one holds no complete output set)."""
    from pydantic import ValidationError

    try:
        return Manifest.model_validate_json(Path(output_dir, name).read_bytes())
    except (OSError, ValueError, ValidationError):
        return None


def incomplete_files(output_dir: str | os.PathLike[str]) -> list[str] | None:
    """Why the output set in ``output_dir`` is not complete: the listed files that are
    missing or differ from their manifest entry ([] for a complete set), or None when there
    is no manifest (the set was never completed, or a run is rewriting it)."""
    manifest = read_manifest(output_dir)
    if manifest is None:
        return None
    bad = []
    for entry in manifest.files:
        path = Path(output_dir, entry.name)
        if not _plain_name(entry.name) or not path.is_file() or file_entry(path) != entry:
            bad.append(entry.name)
    return bad


def foreign_entries(output_dir: str | os.PathLike[str]) -> list[str]:
    """What in ``output_dir`` commopt did not write, so a run must not touch it without
    ``--force``: every entry that no record there lists (the user's files, folders, links).
    Sorted; [] for a missing or empty directory.

    commopt's are: the files its manifest (or the previous one a run moved aside) lists, the
    names a run recorded before writing them (:data:`PENDING_FILE`: a killed run's partial
    set), those records themselves and temp files of :func:`commopt.atomic.atomic_path`. A
    listed output edited since is still commopt's output: a new run replaces it.
    """
    from commopt import atomic

    out = Path(output_dir)
    try:
        entries = sorted(os.scandir(out), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    listed = set(_pending_names(out))
    for name in (PREVIOUS_MANIFEST_FILE, MANIFEST_FILE):
        manifest = read_manifest(out, name)
        if manifest is not None:
            listed.update(f.name for f in manifest.files)
    own = (MANIFEST_FILE, PREVIOUS_MANIFEST_FILE, PENDING_FILE)
    return [entry.name for entry in entries
            if entry.name not in own and not atomic.is_temp_file(entry.name)
            and (entry.name not in listed or not entry.is_file(follow_symlinks=False))]


def _changed(path: Path, recorded: ManifestFile) -> bool:
    try:
        return path.stat().st_size != recorded.bytes or file_entry(path) != recorded
    except OSError:
        return True  # unreadable: it cannot be shown to be commopt's


def check_output_dir(output_dir: str | os.PathLike[str], new_names: Iterable[str] = (), *,
                     inputs: Iterable[tuple[str, PathLike | None]] = (), force: bool = False) -> None:
    """Refuse, before anything is written, an output set in ``output_dir`` that would
    overwrite one of ``inputs`` (:func:`guard_outputs`), or a directory holding files commopt
    did not write (see :func:`foreign_entries`) unless ``force``: a user's file is never
    replaced or mixed into an output set by accident. Raises
    :class:`~commopt.errors.OutputError` naming the first few; a path that exists and is not a
    directory is an :class:`~commopt.errors.OptionError`.
    """
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise OptionError("exists and is not a directory", file=str(out), field="--output")
    new_names = list(new_names)
    guard_outputs([("--output", out / name) for name in new_names], inputs)
    if force:
        return
    foreign = foreign_entries(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputError(f"holds {len(foreign)} file(s) commopt did not write ({shown}); choose an "
                          "empty or new directory, or pass --force to write there anyway",
                          file=str(out), field="--output")


def output_names_known_before_load(graph_path: PathLike | None, output_dir: PathLike) -> list[str]:
    """The output file names an optimize run into ``output_dir`` can name before loading its
    graph: the fixed ones and, for a graph given as a file, the reordered graph's (the
    input's name), which must not be one of the fixed ones (OutputError)."""
    fixed = [PLAN_FILE, REPORT_HTML, TRACE_FILE, SUMMARY_FILE, MANIFEST_FILE, PREVIOUS_MANIFEST_FILE,
             PENDING_FILE]
    if graph_path is None:
        return fixed
    _refuse_graph_file_clash(Path(graph_path).name, fixed, Path(output_dir))
    return [Path(graph_path).name, *fixed]


def _refuse_graph_file_clash(graph_file: str, other_names: Iterable[str], out: Path) -> None:
    if graph_file in other_names:
        raise OutputError(f"the reordered graph would be written as {graph_file}, a file "
                          "name the output set uses for another file; rename the input graph",
                          file=str(out / graph_file), field="--output")


def written_by_commopt(path: PathLike) -> bool:
    """Whether ``path`` is a file of a complete commopt output set, unchanged since: the
    manifest beside it lists it with its size and SHA-256 (e.g. a reordered graph that
    ``commopt optimize`` wrote)."""
    p = Path(path)
    manifest = read_manifest(p.parent)
    if manifest is None or not p.is_file():
        return False
    entry = next((f for f in manifest.files if f.name == p.name), None)
    return entry is not None and not _changed(p, entry)


def _plain_name(name: str) -> bool:
    """A bare file name (no directory part, not '.'/'..'): all a manifest may list."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name \
        and "\0" not in name


def _retire_previous_set(out: Path, new_names: set[str], inputs: list[tuple[str, PathLike | None]]) -> None:
    """Mark the directory's set incomplete before anything is written (its manifest is moved
    to :data:`PREVIOUS_MANIFEST_FILE`), then remove what the earlier set had that this one will
    not rewrite, and orphaned temp files: a reader never finds a manifest beside a mix of old
    and new files. A run killed here leaves the previous manifest where the next run reads it."""
    from commopt import atomic

    manifest_path = out / MANIFEST_FILE
    previous_path = out / PREVIOUS_MANIFEST_FILE
    if manifest_path.exists() or manifest_path.is_symlink():
        with atomic.write_errors(manifest_path):
            if manifest_path.is_symlink() or not manifest_path.is_file():
                manifest_path.unlink()  # not a file commopt wrote: nothing to keep
            else:
                os.replace(manifest_path, previous_path)
        atomic.fault_point("after-remove", MANIFEST_FILE)
    old = read_manifest(out, PREVIOUS_MANIFEST_FILE)
    input_paths = [Path(p) for _, p in inputs if p is not None]
    for entry in old.files if old is not None else ():
        path = out / entry.name
        if (entry.name in new_names or not _plain_name(entry.name) or path.is_symlink()
                or not path.is_file() or any(_same_file(path, p) for p in input_paths)):
            continue
        try:
            if file_entry(path) != entry:  # changed since: no longer the file commopt wrote
                continue
        except OSError:  # unreadable: it cannot be shown to be commopt's, so it stays
            continue
        with atomic.write_errors(path):
            path.unlink()
        atomic.fault_point("after-remove", entry.name)
    atomic.clean_temp_files(out)


def _identity(path: PathLike) -> tuple:
    """What makes two paths the same file: device and inode when it exists, else the
    absolute path with every symlink resolved."""
    p = Path(path)
    try:
        st = p.stat()
    except (OSError, ValueError):
        return ("path", os.path.realpath(p))
    return ("inode", st.st_dev, st.st_ino)


def _same_file(a: PathLike, b: PathLike) -> bool:
    return _identity(a) == _identity(b)


def guard_outputs(outputs: Iterable[tuple[str, PathLike | None]],
                  inputs: Iterable[tuple[str, PathLike | None]]) -> None:
    """Refuse, before anything is written, an output that is the same file as an input or as
    another output of the same command.

    Both are (label, path) pairs, the label the option or argument that named the file
    (``--output``, ``GRAPH``, ``--groups``, ``configuration file``); None paths are skipped.
    Paths are compared as files (symlinks resolved, hard links by inode), not as strings.
    Raises :class:`~commopt.errors.OutputError` naming both: one line, exit code 2.
    """
    ins = [(label, p, _identity(p)) for label, p in inputs if p is not None]
    seen: list[tuple[str, PathLike, tuple]] = []
    for label, p in outputs:
        if p is None:
            continue
        ident = _identity(p)
        for in_label, in_path, in_ident in ins:
            if ident == in_ident:
                raise OutputError(f"would overwrite the input {in_label} ({in_path}); choose "
                                  "another output path", file=str(p), field=label)
        for out_label, out_path, out_ident in seen:
            if ident == out_ident:
                what = "output" if out_label == label else f"{out_label} output"
                raise OutputError(f"is also the {what} ({out_path}); give each output its own "
                                  "path", file=str(p), field=label)
        seen.append((label, p, ident))


def estimator_inputs(options) -> list[tuple[str, PathLike | None]]:
    """The files an :class:`~commopt.estimators.EstimatorOptions` reads (profile, table,
    hardware file), labelled by their option, for :func:`guard_outputs`."""
    hardware = options.hardware
    hardware_file = hardware if isinstance(hardware, (str, os.PathLike)) and Path(hardware).is_file() else None
    return [("--profile", options.profile), ("--table", options.table), ("--hardware", hardware_file)]


def _runner_note(model) -> str:
    """One line on what the runner does per step (copies left, zero-copy producers)."""
    return (f"runner {model.graph_name}: {model.zero_copy_per_iter} producer(s) write straight into "
            f"comm buffers, {model.copies_per_iter} copy-in(s) per step, "
            f"{len(model.emulated)} emulated node(s)")
