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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from commopt.errors import GraphError, OptionError, OutputError
from commopt.progress import SILENT, Progress
from commopt.result import OptimizeResult, OutputOptions, Outputs
from commopt.schemas.manifest import Manifest, ManifestFile

if TYPE_CHECKING:
    from commopt.forked import RenderJob
    from commopt.schemas.buffer_plan import BufferPlan
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
                   output_dir: Path | None = None,
                   jobs: int = 1) -> tuple[Outputs, dict[str, RenderJob]]:
    """:func:`build_outputs`, and the jobs rendering ``trace.json`` and ``report.html`` (by
    file name) in forked children when there are any: with ``output_dir`` given, ``jobs`` >= 2
    and a large graph (:func:`commopt.forked.worth_forking`). The trace's child starts as soon
    as the report is built, before the buffer plan and the runner (the report's footprint,
    shown by ``report.html`` only, is filled in after the runner), and also packs the original
    order's buffers for the plan comparison; the page's starts at the end. Without children
    the report comes after the runner, whose temporaries are gone by then (a lower peak), and
    :func:`write_outputs` renders both files itself."""
    from commopt import atomic
    from commopt.buffers import compare_plans, plan_buffers
    from commopt.buffers.planner import DEFAULT_ALIGN_BYTES, original_arena_totals
    from commopt.forked import RenderJob, worth_forking
    from commopt.report import build_report

    g = result.graph
    g0 = result.before_graph
    order = list(result.order)
    align = DEFAULT_ALIGN_BYTES if options.align is None else options.align

    def built_report(footprint=None) -> OverlapReport:
        with progress.stage("build report"):
            return build_report(
                g, g0.original_order, order, list(result.durations_us),
                before_graph=g0, before_durations_us=result.before_durations_us,
                estimator_name=result.estimator,
                before_sim=result.pipeline.initial, after_sim=result.pipeline.final,
                memory_budget_bytes=result.summary.memory_budget_bytes, notes=result.summary.notes,
                certificate=result.summary.certificate,
                data_dependent=result.summary.data_dependent,
                footprint=footprint, robustness=result.summary.robustness,
            )

    def original_totals() -> tuple[int, int]:
        return original_arena_totals(g0, g0.original_order, align=align,
                                     collective_types=options.comm_buffers,
                                     persistent_params=options.persistent_params)

    rendering: dict[str, RenderJob] = {}
    report = None
    if output_dir is not None and worth_forking(len(g), jobs):
        report = built_report()

        def trace_and_original_totals(fh: IO[bytes]) -> tuple[int, int]:
            totals = original_totals()
            with atomic.write_errors(output_dir / TRACE_FILE):  # e.g. the disk filled up
                _render_trace(report, fh)
            return totals

        with progress.stage("trace and original-order plan (forked)"):
            rendering[TRACE_FILE] = RenderJob(trace_and_original_totals, output_dir, fork=True)
    try:
        with progress.stage("plan buffers"):
            plan = plan_buffers(g, order, align=align, collective_types=options.comm_buffers,
                                persistent_params=options.persistent_params)
        if rendering:  # the plan file is rendered while the runner is generated
            with progress.stage("render buffer_plan.json (forked)"):
                rendering[PLAN_FILE] = RenderJob(
                    lambda fh: _render_plan(plan, fh, output_dir / PLAN_FILE), output_dir, fork=True)
        notes = list(result.summary.notes)
        with progress.stage("generate runner"):
            runner_name, runner_source, note, predicted = _runner(g, order, plan)
        notes.append(note)
        if rendering:
            with progress.stage("wait for the forked trace"):
                totals = rendering[TRACE_FILE].value()
        else:
            with progress.stage("plan buffers (original order)"):
                totals = original_totals()
        with progress.stage("plan buffers (comparison)"):
            comparison = compare_plans(g, g0.original_order, order, align=align,
                                       collective_types=options.comm_buffers, new_plan=plan,
                                       persistent_params=options.persistent_params,
                                       original_graph=g0, original_totals=totals)
        footprint = result.summary.footprint
        if footprint is not None and predicted is not None:  # the runner's exact figure
            footprint = footprint.model_copy(update={"after_bytes": predicted,
                                                     "arena_after_bytes": plan.totals.arena_bytes})
        if report is None:
            report = built_report(footprint)
        elif footprint is not None:  # built before the runner, for the forked trace
            report = report.model_copy(update={"footprint": footprint})
        if rendering:  # the page is rendered while the other files are written
            with progress.stage("render report.html (forked)"):
                rendering[REPORT_HTML] = RenderJob(
                    lambda fh: _render_html(report, fh, output_dir / REPORT_HTML), output_dir,
                    fork=True)
    except BaseException:
        for job in rendering.values():
            job.cancel()
        raise
    files = [result.summary.output, PLAN_FILE, *([runner_name] if runner_name else []),
             REPORT_HTML, TRACE_FILE, SUMMARY_FILE]
    summary = result.summary.model_copy(deep=True, update={
        "buffer_plan": comparison, "notes": notes, "outputs": files, "footprint": footprint})
    outputs = Outputs(summary=summary, graph_file=result.summary.output, plan=plan,
                      runner_name=runner_name, runner_source=runner_source, report=report)
    return outputs, rendering


def build_and_write_outputs(result: OptimizeResult, options: OutputOptions,
                            output_dir: str | os.PathLike[str], *,
                            inputs: Iterable[tuple[str, PathLike | None]] = (),
                            force: bool = False, jobs: int = 1,
                            progress: Progress = SILENT) -> tuple[Outputs, tuple[Path, ...]]:
    """:func:`build_outputs` then :func:`write_outputs`, the same files byte for byte. With
    ``jobs`` >= 2, on a large graph, the Chrome trace (and the original order's buffer
    packing) is rendered by a forked child on another core while this process plans the
    buffers and generates the runner, and ``report.html`` by another while it writes them
    (:mod:`commopt.forked`)."""
    outputs, rendering = _build_outputs(result, options, progress, output_dir=Path(output_dir),
                                        jobs=jobs)
    try:
        written = write_outputs(result, outputs, output_dir, inputs=inputs, force=force,
                                progress=progress, rendered=rendering)
    finally:
        for job in rendering.values():
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


def write_outputs(result: OptimizeResult, outputs: Outputs, output_dir: str | os.PathLike[str], *,
                  inputs: Iterable[tuple[str, PathLike | None]] = (),
                  force: bool = False, progress: Progress = SILENT,
                  rendered: Mapping[str, RenderJob] | None = None) -> tuple[Path, ...]:
    """Write the output set into ``output_dir``; returns the paths in writing order
    (``manifest.json`` last).

    ``result`` provides the graph and order the reordered graph file is written from.
    ``inputs`` (label, path) are files the run read besides the graph (groups, profile,
    table, ...): no output may be one of them (:func:`guard_outputs`), checked before
    anything is written, and the directory may hold only files commopt wrote unless
    ``force`` (:func:`check_output_dir`). An earlier run's manifest is moved aside first, then the files it
    listed that this run does not write are removed (only when they still have the digest it
    recorded), and temporary files a killed commopt left; the new manifest is written last.
    """
    from commopt import atomic
    from commopt.buffers import save_plan
    from commopt.io import save_graph
    from commopt.report import write_html, write_trace

    out = Path(output_dir)
    g = result.graph
    names = [outputs.graph_file, *([PLAN_FILE] if outputs.plan is not None else []),
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
    with progress.stage("write graph"):
        written.append(save_graph(g, out / outputs.graph_file, list(result.order)))
    if outputs.plan is not None:
        with progress.stage("write buffer plan"):
            job = (rendered or {}).get(PLAN_FILE)
            if job is None:
                save_plan(outputs.plan, out / PLAN_FILE)
            else:
                atomic.write_from(out / PLAN_FILE, job.file())
            written.append(out / PLAN_FILE)
    if outputs.runner_name is not None:
        path = out / outputs.runner_name
        with progress.stage("write runner"), atomic.atomic_path(path) as tmp:
            tmp.write_text(outputs.runner_source, encoding="utf-8")
            tmp.chmod(0o755)
        written.append(path)
    if outputs.report is not None:
        with progress.stage("write reports"):
            for name, write in ((REPORT_HTML, write_html), (TRACE_FILE, write_trace)):
                job = (rendered or {}).get(name)
                if job is None:
                    write(outputs.report, out / name)
                else:
                    atomic.write_from(out / name, job.file())
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


def _render_html(report: OverlapReport, fh: IO[bytes], path: Path) -> None:
    """``report.html`` of ``report`` written into the open binary file ``fh``, as
    :func:`commopt.report.write_html` writes it to ``path``."""
    from commopt import atomic
    from commopt.report import render_html

    with atomic.write_errors(path):
        fh.write(render_html(report).encode("utf-8"))


def _render_trace(report: OverlapReport, fh: IO[bytes]) -> None:
    """The trace file of ``report`` written into the open binary file ``fh`` (UTF-8, as
    :func:`commopt.report.write_trace` writes it)."""
    from commopt.report.trace import trace_chunks

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
