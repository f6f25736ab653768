"""The optimize output set: when a piece cannot be produced, and the manifest that tells a
complete set from a run that was killed or failed (issue 21, class 8)."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import commopt
from commopt.atomic import FAULT_ENV, is_temp_file
from commopt.errors import OutputError
from commopt.ir.builder import GraphBuilder
from commopt.outputs import MANIFEST_FILE, PENDING_FILE, PLAN_FILE, incomplete_files, read_manifest
from commopt.schemas.manifest import Manifest
from commopt.synth import fsdp_tp_stack


def test_graph_the_runner_cannot_launch_still_gets_the_rest_of_the_outputs(tmp_path):
    b = GraphBuilder(name="p2p", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (64, 64))
    y = b.compute("y", "aten.relu.default", [x], (64, 64), duration_us=5)
    s = b.collective("send", "send", "0", y, reduce_op=None, duration_us=20)
    w = b.wait("send_wait", s)
    z = b.compute("z", "aten.relu.default", [x], (64, 64), duration_us=30)
    b.output([w, z])
    result = commopt.optimize(b.build(), output_dir=tmp_path, timings=False)
    names = [p.name for p in result.written]
    assert "run_p2p.py" not in names
    assert names == ["p2p.json", "buffer_plan.json", "report.html", "trace.json", "summary.json",
                     "manifest.json"]
    assert any(n.startswith("runner not generated:") and "send" in n for n in result.summary.notes)


def _small(name: str):
    return fsdp_tp_stack(2, dp=2, tp=1, hidden=64, tokens=32, name=name)


def test_the_manifest_is_written_last_and_lists_every_file_with_its_digest(tmp_path):
    result = commopt.optimize(_small("small"), output_dir=tmp_path, timings=False)
    assert result.written[-1] == tmp_path / MANIFEST_FILE
    manifest = Manifest.model_validate_json((tmp_path / MANIFEST_FILE).read_text())
    assert [f.name for f in manifest.files] == [p.name for p in result.written[:-1]]
    for entry in manifest.files:
        data = (tmp_path / entry.name).read_bytes()
        assert (entry.bytes, entry.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert incomplete_files(tmp_path) == []
    (tmp_path / "report.html").write_text("changed")
    assert incomplete_files(tmp_path) == ["report.html"]


def _listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_directory_with_files_commopt_did_not_write_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    before = _listing(out)
    # the graph does not exist: the directory is refused before the graph is even loaded
    with pytest.raises(OutputError, match=r"holds 1 file\(s\) commopt did not write \(notes.txt\).*--force"):
        commopt.optimize(tmp_path / "missing.json", output_dir=out, timings=False)
    assert _listing(out) == before


def test_an_output_commopt_wrote_is_replaced_even_if_edited_since(tmp_path):
    commopt.optimize(_small("small"), output_dir=tmp_path, timings=False)
    (tmp_path / "report.html").write_text("edited by the user")
    commopt.optimize(_small("small"), output_dir=tmp_path, timings=False)
    assert (tmp_path / "report.html").read_text() != "edited by the user"
    assert incomplete_files(tmp_path) == []


def test_commopts_own_earlier_set_is_replaced_without_force(tmp_path):
    commopt.optimize(_small("first"), output_dir=tmp_path, timings=False)
    commopt.optimize(_small("second"), output_dir=tmp_path, timings=False)
    assert incomplete_files(tmp_path) == [] and not (tmp_path / "first.json").exists()


def test_a_new_run_removes_only_the_earlier_sets_files(tmp_path):
    commopt.optimize(_small("first"), output_dir=tmp_path, timings=False)
    (tmp_path / "notes.txt").write_text("the user's own file")
    (tmp_path / "buffer_plan.json").write_text("edited by the user: no longer commopt's file")
    commopt.optimize(_small("second"), output_dir=tmp_path, timings=False, force=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    # first.json and run_first.py were the first set's; buffer_plan.json is rewritten
    assert names == sorted(["second.json", "buffer_plan.json", "run_second.py", "report.html",
                            "trace.json", "summary.json", MANIFEST_FILE, "notes.txt"])
    assert incomplete_files(tmp_path) == []


def test_an_edited_stale_file_and_names_outside_the_directory_are_kept(tmp_path):
    out = tmp_path / "out"
    commopt.optimize(_small("first"), output_dir=out, timings=False)
    (out / "run_first.py").write_text("# edited by the user\n")
    (tmp_path / "outside.txt").write_text("not in the output directory")
    manifest = read_manifest(out)
    data = (tmp_path / "outside.txt").read_bytes()
    for name in ("../outside.txt", str(tmp_path / "outside.txt")):
        manifest.files.append(manifest.files[0].model_copy(update={
            "name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}))
    (out / MANIFEST_FILE).write_text(manifest.model_dump_json())
    commopt.optimize(_small("second"), output_dir=out, timings=False)  # run_first.py is not rewritten
    assert (out / "run_first.py").read_text() == "# edited by the user\n"
    assert (tmp_path / "outside.txt").exists() and not (out / "first.json").exists()


def test_a_stale_file_that_is_an_input_is_kept(tmp_path):
    out = tmp_path / "out"
    commopt.optimize(_small("first"), output_dir=out, timings=False)
    result = commopt.optimize(_small("second"), timings=False)
    outputs = commopt.build_outputs(result)
    commopt.write_outputs(result, outputs, out, inputs=[("--table", out / "first.json")])
    assert (out / "first.json").exists() and not (out / "run_first.py").exists()


def test_orphaned_temp_files_are_cleaned_and_user_files_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    tmp_path.mkdir(exist_ok=True)
    orphan = tmp_path / f".summary.json.commopt-{dead}-abcd1234.tmp"
    orphan.write_text("{")
    (tmp_path / ".summary.json.x.tmp").write_text("not commopt's naming")
    commopt.optimize(_small("small"), output_dir=tmp_path, timings=False, force=True)
    assert not orphan.exists() and (tmp_path / ".summary.json.x.tmp").exists()


def test_a_failed_run_leaves_no_manifest(tmp_path):
    commopt.optimize(_small("small"), output_dir=tmp_path, timings=False)
    assert incomplete_files(tmp_path) == []
    (tmp_path / "summary.json").unlink()
    (tmp_path / "summary.json").mkdir()  # a real failure when summary.json is written
    with pytest.raises(OutputError, match="summary.json: cannot write"):
        commopt.optimize(_small("small"), output_dir=tmp_path, timings=False, force=True)
    assert incomplete_files(tmp_path) is None and not (tmp_path / MANIFEST_FILE).exists()


# Kill points (COMMOPT_FAULT_INJECT) across the whole write of a set over an earlier one: each
# file's write phases, the removal of the old manifest and of the earlier set's stale file.
KILLS = ["after-remove:manifest.json", "after-remove:h.json", "mid-write:g.json",
         "before-rename:buffer_plan.json", "after-rename:run_tp.py", "mid-write:report.html",
         "after-rename:trace.json", "before-rename:summary.json", "after-rename:summary.json",
         "mid-write:manifest.json", "before-rename:manifest.json", "after-rename:manifest.json"]


def _optimize(src: Path, out: Path, *extra: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-m", "commopt", "-q", "optimize", str(src), "-o", str(out),
                           "--no-timings", *extra], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("fault", KILLS)
def test_a_killed_optimize_leaves_a_complete_set_or_no_manifest(tmp_path, samples_dir, fault):
    """SIGKILL at each point: a manifest, when there is one, lists exactly files that exist
    with its digests; before the new manifest is in place there is none; the next run
    completes the set, removes the earlier set's stale file and every orphaned temp file, and
    needs no --force: the killed run's files are known as commopt's (its pending record)."""
    src, old_src = tmp_path / "g.json", tmp_path / "h.json"
    shutil.copy(samples_dir / "ws2" / "tp.json", src)
    shutil.copy(samples_dir / "ws2" / "tp.json", old_src)
    out = tmp_path / "out"
    assert _optimize(old_src, out, "--passes", "sink-waits").returncode == 0  # the earlier set
    assert incomplete_files(out) == []

    proc = _optimize(src, out, fault=fault)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    state = incomplete_files(out)
    assert state in (None, []), f"a manifest lists missing or changed files: {state}"
    assert (state == []) == (fault == "after-rename:manifest.json")

    done = _optimize(src, out)
    assert done.returncode == 0, done.stderr
    listed = [f.name for f in read_manifest(out).files]
    assert listed == ["g.json", "buffer_plan.json", "run_tp.py", "report.html", "trace.json", "summary.json"]
    assert incomplete_files(out) == []
    names = {p.name for p in out.iterdir()}
    assert names == {*listed, MANIFEST_FILE}  # no h.json, no temp file, no pending record
    assert not any(is_temp_file(n) for n in names)


@pytest.mark.parametrize("stem", ["summary", "manifest", "buffer_plan", "trace"])
def test_a_graph_file_named_like_another_output_is_refused(tmp_path, stem):
    from commopt.io.json_graph import save_json_graph

    src = tmp_path / f"{stem}.json"
    save_json_graph(_small("g"), src)
    with pytest.raises(OutputError, match=f"written as {stem}.json, a file name the output set uses"):
        commopt.optimize(src, output_dir=tmp_path / "out", timings=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_first_run_killed_before_its_manifest_needs_no_force_to_finish(tmp_path, samples_dir):
    """No manifest yet: the partial set is known as commopt's through the pending record."""
    src = tmp_path / "g.json"
    shutil.copy(samples_dir / "ws2" / "tp.json", src)
    out = tmp_path / "out"
    killed = _optimize(src, out, fault="mid-write:report.html")
    assert killed.returncode == -signal.SIGKILL and (out / "g.json").exists()
    assert not (out / MANIFEST_FILE).exists()
    done = _optimize(src, out)
    assert done.returncode == 0, done.stderr
    assert incomplete_files(out) == [] and not (out / PENDING_FILE).exists()


@pytest.mark.parametrize(("graph", "within_groups"), [
    ("corpus/ws8/llama_fsdp.pt2", None), ("realistic/llama3_8b_L2.json", None),
    ("realistic/llama3_8b_L2.json", False),
])
def test_files_rendered_by_forked_children_are_the_same_files(tmp_path, monkeypatch, samples_dir,
                                                              graph, within_groups):
    """On large graphs buffer_plan.json and the runner are rendered by a forked child while
    this process renders the other files, and the input order's scenario makespans and arena
    totals by a child that runs beside the passes (commopt.forked): every file of the set is
    byte for byte the one rendered in process, on a real-model archive and a JSON graph
    (rendered ahead of writing too). With each group's order kept (one run of the passes) the
    planning child starts before the final order is simulated in full. The plan and the
    runner's source are made in this process only when asked for, and then equal the files."""
    graph = samples_dir / graph
    in_process = commopt.optimize(graph, output_dir=tmp_path / "a", timings=False,
                                  reorder_within_groups=within_groups)
    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    planned_here = []
    plan_of = commopt.outputs._plan_of
    monkeypatch.setattr("commopt.outputs._plan_of", lambda *a: planned_here.append(1) or plan_of(*a))
    forked = commopt.optimize(graph, output_dir=tmp_path / "b", timings=False, jobs=2,
                              reorder_within_groups=within_groups)
    assert forked.pipeline.final.events and forked.pipeline.records[-1].after is forked.pipeline.final
    assert [p.name for p in forked.written] == [p.name for p in in_process.written]
    assert _listing(tmp_path / "b") == _listing(tmp_path / "a")
    assert forked.outputs.report == in_process.outputs.report
    assert forked.summary == in_process.summary
    assert planned_here == []  # planned by the child only
    assert forked.plan == in_process.plan and planned_here == [1]
    assert forked.outputs.runner_source == in_process.outputs.runner_source
    assert forked.outputs.runner_source == (tmp_path / "b" / forked.outputs.runner_name).read_text()
    assert forked.plan is forked.plan and planned_here == [1]  # made once
    modes = {d: {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / d).iterdir()} for d in "ab"}
    assert modes["b"] == modes["a"] and modes["b"][forked.outputs.runner_name] & 0o111


@pytest.mark.parametrize(("module", "renderer", "name"), [
    ("commopt.report.trace", "trace_chunks", "trace.json"),
    ("commopt.buffers.planfile", "plan_chunks", PLAN_FILE),
])
def test_a_forked_render_that_fails_leaves_no_file_and_no_manifest(tmp_path, monkeypatch, module,
                                                                    renderer, name):
    def broken(_):
        yield "{"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    monkeypatch.setattr(f"{module}.{renderer}", broken)
    with pytest.raises(OutputError, match=rf"{name}: cannot write: No space left on device"):
        commopt.optimize(_small("small"), output_dir=tmp_path, timings=False, jobs=2)
    assert not (tmp_path / name).exists() and not (tmp_path / MANIFEST_FILE).exists()
    assert not any(is_temp_file(p.name) for p in tmp_path.iterdir())


def test_a_forked_runner_generation_that_fails_is_raised_and_writes_nothing(tmp_path, monkeypatch):
    """The runner's child raises: the same error reaches the caller, the other children are
    stopped and no file of the set is written."""
    def broken(*_):
        raise RuntimeError("codegen broke")

    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    monkeypatch.setattr("commopt.outputs._runner", broken)
    with pytest.raises(RuntimeError, match="codegen broke"):
        commopt.optimize(_small("small"), output_dir=tmp_path / "out", timings=False, jobs=2)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_the_input_order_child_is_stopped_when_the_passes_fail(tmp_path, monkeypatch):
    """The child started beside the passes is cancelled (killed and reaped) when the passes
    raise, and the passes' error is what the caller sees."""
    import commopt.api

    cancelled = []
    cancel = commopt.api._InputOrderWork.cancel

    def recorded(self):
        cancelled.append(self)
        cancel(self)

    def broken(*_args, **_kwargs):
        raise RuntimeError("a pass broke")

    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    monkeypatch.setattr(commopt.api._InputOrderWork, "cancel", recorded)
    monkeypatch.setattr(commopt.api.PassManager, "run", broken)
    with pytest.raises(RuntimeError, match="a pass broke"):
        commopt.optimize(_small("small"), output_dir=tmp_path / "out", timings=False, jobs=2)
    assert len(cancelled) == 1 and cancelled[0]._job._pid is None


def test_lower_bounds_from_a_child_that_died_are_computed_in_process(tmp_path, monkeypatch):
    """The child computing the lower bounds beside the footprint budget (and then the input
    order's identity, scenarios and arena totals) is killed before it reports: all of it is
    computed here and the output set is the one a run without children writes."""
    commopt.optimize(_small("small"), output_dir=tmp_path / "a", timings=False)

    def killed(_graph):
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr("commopt.forked.FORK_MIN_NODES", 0)
    monkeypatch.setattr("commopt.sim.bounds.computed_lower_bounds", killed)
    commopt.optimize(_small("small"), output_dir=tmp_path / "b", timings=False, jobs=2)
    assert _listing(tmp_path / "b") == _listing(tmp_path / "a")
