"""The profile estimator: fitting, log-space interpolation, fallbacks, model files."""

from __future__ import annotations

import math

import pytest

from commopt.errors import OptionError
from commopt.estimators import EstimatorOptions, resolve
from commopt.estimators.kineto import CollectiveSample, ComputeSample, parse_trace
from commopt.estimators.profile import (
    ProfileEstimator,
    calibrate,
    compute_key,
    fit_collectives,
    fit_compute,
    load_profile,
    write_profile,
)
from commopt.ir.builder import GraphBuilder
from tests.estimators.traces import SHARED_TRACES, new_format_trace, write


def _samples(points):
    return [CollectiveSample("all_reduce", 2, b, t, None, "kernel args") for b, t in points]


def test_fit_recovers_latency_and_bandwidth():
    # 10 us + bytes / (20 GB/s)
    pts = [(b, 10 + b / 20e3) for b in (1e3, 1e5, 1e7)]
    (fit,) = fit_collectives(_samples([(int(b), t) for b, t in pts]))
    assert fit.latency_us == pytest.approx(10, rel=1e-6) and fit.bandwidth_gbps == pytest.approx(20, rel=1e-6)
    assert (fit.min_bytes, fit.max_bytes, len(fit.points)) == (1000, 10_000_000, 3)


def test_median_per_size_and_log_interpolation():
    fits = fit_collectives(_samples([(100, 10.0), (100, 30.0), (100, 11.0), (10_000, 1000.0)]))
    est = ProfileEstimator(calibrate_model(fits))
    assert est.collective_us("all_reduce", 2, 100) == 11.0  # the median of three
    # halfway in log(bytes) -> geometric mean of the times
    assert est.collective_us("all_reduce", 2, 1000) == pytest.approx(math.sqrt(11.0 * 1000.0))


def test_outside_the_range_or_unmeasured_defers_and_says_so():
    est = ProfileEstimator(calibrate_model(fit_collectives(_samples([(100, 10.0), (1000, 20.0)]))))
    assert est.collective_us("all_reduce", 2, 10_000) is None
    assert est.collective_us("all_reduce", 4, 500) is None
    assert est.collective_us("all_gather", 2, 500) is None
    assert any("outside the measured 100-1,000 bytes" in n for n in est.notes)
    assert any("no all_reduce over 4 ranks measured" in n for n in est.notes)


def calibrate_model(fits, compute=()):
    from commopt.schemas.profile import ProfileModel

    return ProfileModel(source="test", device="gpu", collectives=fits, compute=list(compute))


def _graph():
    b = GraphBuilder(world_size=2)
    b.group("0", ranks=[0, 1])
    a = b.input("a", (64, 32))
    w = b.input("w", (32, 16))
    mm = b.compute("mm", "aten.mm.default", [a, w], (64, 16))
    x = b.input("x", (1024,))
    c = b.collective("ar", "all_reduce", "0", x)  # 4096 bytes: measured in step 1
    c2 = b.collective("ar_big", "all_reduce", "0", b.input("y", (1 << 20,)))  # outside
    b.output([mm, b.wait("w1", c), b.wait("w2", c2)])
    return b.build()


def test_compute_key_matches_trace_keys():
    g = _graph()
    assert compute_key(g.node("mm"), g) == ("aten.mm", ((64, 32), (32, 16)), ("float32", "float32"))
    entries = fit_compute([ComputeSample("aten.mm", ((64, 32), (32, 16)), ("float32", "float32"), 7.0, 1, None),
                           ComputeSample("aten.mm", None, None, 99.0, 1, None)])
    assert len(entries) == 1 and entries[0].time_us == 7.0


def test_calibrate_from_a_trace_and_estimate_a_graph(tmp_path):
    trace = write(tmp_path / "t.json", new_format_trace())
    model = calibrate(trace, steps=[1])
    assert model.steps == [1] and len(model.collectives) == 1 and model.collectives[0].points[0].time_us == 100
    path = write_profile(model, tmp_path / "profile.json")
    assert load_profile(path) == model
    chain = resolve("profile", EstimatorOptions(profile=str(path)))
    assert chain.name == "profile,analytical"
    g = _graph()
    d = chain.durations(g)
    assert d[g.index_of["mm"]] == 41.0 and chain.sources[g.index_of["mm"]] == "profile"
    assert d[g.index_of["ar"]] == 100.0
    assert chain.sources[g.index_of["ar_big"]] == "analytical"
    assert any("outside the measured" in n for n in chain.notes)
    # a trace path works directly too
    assert resolve("profile", EstimatorOptions(profile=str(trace))).durations(g)[g.index_of["mm"]] == 41.5


def test_profile_needs_a_file_and_a_valid_model(tmp_path):
    with pytest.raises(OptionError, match="needs --profile"):
        resolve("profile")
    bad = tmp_path / "p.json"
    bad.write_text('{"format": "commopt-profile", "version": 1, "source": "x"}')
    with pytest.raises(OptionError, match="bad profile model"):
        load_profile(bad)


@pytest.mark.skipif(not (SHARED_TRACES / "hta" / "nccl_data.json.gz").is_file(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_trace_reproduces_a_measured_size():
    path = SHARED_TRACES / "hta" / "nccl_data.json.gz"
    # broadcast of 53,120 floats took 30.975 and 30.848 us in steps 4 and 5: one rank's trace
    # gives the fastest (the least waiting); the raw fit gives their median
    est = ProfileEstimator(calibrate(path, steps=[4, 5]))
    assert est.collective_us("broadcast", 2, 53120 * 4) == 30.848
    raw = ProfileEstimator(calibrate(path, steps=[4, 5], separate_waiting=False))
    assert raw.collective_us("broadcast", 2, 53120 * 4) == pytest.approx((30.975 + 30.848) / 2, rel=1e-3)


def test_unknown_steps_are_an_error(tmp_path):
    trace = write(tmp_path / "t.json", new_format_trace())
    with pytest.raises(OptionError, match="no profiler step 9 in the trace \\(it has 1, 2\\)"):
        calibrate(trace, steps=[9])


@pytest.mark.parametrize("points, latency, bw, how", [
    ([(4096, 2.048)], 0.0, 2.0, "latency forced to 0: fewer than 2 sizes"),
    ([(1000, 5.0), (2000, 20.0), (3000, 35.0)], 0.0, 14e6 / 150e3 / 1e3,  # through the origin: sum(x^2) / sum(xy)
     "latency forced to 0: the free line had a negative latency"),
    ([(1000, 9.0), (2000, 5.0)], 0.0, 5000 / 19e3,
     "latency forced to 0: time does not grow with size"),
    ([(0, 3.0)], 0.0, 0.0, "latency forced to 0: fewer than 2 sizes; bandwidth unknown (0)"),
])
def test_each_fit_says_how_it_was_made(points, latency, bw, how):
    (fit,) = fit_collectives(_samples(points))
    assert (fit.latency_us, fit.how) == (latency, how)
    assert fit.bandwidth_gbps == pytest.approx(bw, rel=1e-9)


def _rank_trace(rank: int, scale: float) -> dict:
    """The hand-written trace as rank ``rank`` of 3 saw it: its kernels ``scale`` times as
    long, started earlier so that they end when rank 0's do (a collective ends together on
    every rank; an early rank waits)."""
    data = new_format_trace()
    data["distributedInfo"].update(rank=rank, world_size=3)
    for e in data["traceEvents"]:
        if e["cat"] == "kernel":
            e["ts"] -= e["dur"] * (scale - 1)
            e["dur"] *= scale
            if "Group size" in e["args"]:
                e["args"]["Group size"] = 3
    return data


def test_several_traces_and_their_directory_give_the_model_of_their_merged_samples(tmp_path):
    ranks = tmp_path / "profile"
    ranks.mkdir()
    files = [write(ranks / "trace_rank0.json", _rank_trace(0, 1.0)),
             write(ranks / "trace_rank1.json.gz", _rank_trace(1, 1.5), gz=True),
             write(ranks / "trace_rank2.json", _rank_trace(2, 3.0))]
    (ranks / "README.txt").write_text("not a trace")
    merged = [parse_trace(f) for f in files]
    by_files = calibrate(files)
    assert calibrate(ranks) == by_files == calibrate([files[0], merged[1], files[2]])
    raw = calibrate(files, separate_waiting=False)
    assert raw.collectives == fit_collectives(s for t in merged for s in t.collectives)
    assert by_files.compute == raw.compute == fit_compute(s for t in merged for s in t.compute)
    (fit,) = raw.collectives
    # each size: the median of the three ranks' times (100, 150, 300 and 200, 300, 600)
    assert [(p.time_us, p.count) for p in fit.points] == [(150.0, 3), (300.0, 3)]
    # matched across the ranks: every rank's kernel starts together, so the transfer is the
    # shortest kernel (100 and 200 us), the rest of the longer ones waiting
    (fit,) = by_files.collectives
    assert fit.fitted_on == "transfer" and [(p.time_us, p.count) for p in fit.points] == [(100.0, 3), (200.0, 3)]
    (share,) = by_files.waiting
    assert (share.measured_us, share.transfer_us, share.method) == (1650.0, 900.0, "matched across ranks")
    assert by_files.source == "trace_rank0.json, trace_rank1.json.gz, trace_rank2.json"


@pytest.mark.skipif(not (SHARED_TRACES / "param" / "dlrm_kineto").is_dir(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_per_rank_traces_merge_before_fitting():
    folder = SHARED_TRACES / "param" / "dlrm_kineto"
    files = sorted(folder.glob("worker*.json.gz"))
    assert len(files) == 8
    model = calibrate(folder)
    assert model == calibrate(files)
    samples = [s for f in files for s in parse_trace(f).collectives]
    assert calibrate(folder, separate_waiting=False).collectives == fit_collectives(samples)
    assert all(f.fitted_on == "transfer" and "matched across 8 ranks" in f.how for f in model.collectives)
    # every rank's collectives count: 8 ranks x (5 all_to_all + 3 all_reduce)
    assert sum(p.count for f in model.collectives for p in f.points) == len(samples) == 64
    assert all(f.how for f in model.collectives)


def test_a_version_1_model_file_still_loads(tmp_path):
    # what 'commopt calibrate' wrote before transfer fits: no fitted_on, waiting, slowdown
    v1 = tmp_path / "v1.json"
    v1.write_text('{"format": "commopt-profile", "version": 1, "source": "t.json", "device": "gpu", '
                  '"collectives": [{"type": "all_reduce", "group_size": 2, "latency_us": 0, "bandwidth_gbps": 1, '
                  '"min_bytes": 4096, "max_bytes": 4096, "points": [{"size_bytes": 4096, "time_us": 100, '
                  '"count": 1}], "how": "x"}]}')
    model = load_profile(v1)
    assert model.version == 1 and model.collectives[0].fitted_on is None and not model.waiting
    est = ProfileEstimator(model)
    assert est.collective_us("all_reduce", 2, 4096) == 100 and not any("waiting" in n for n in est.notes)


def test_a_calibrated_model_says_how_much_was_waiting(tmp_path):
    from tests.estimators.traces import rank_trace

    files = [write(tmp_path / f"r{r}.json", rank_trace(r, 2, ks)) for r, ks in
             ((0, [("allreduce", 1024, 0, 150)]), (1, [("allreduce", 1024, 100, 150)]))]
    model = calibrate(files)
    assert model.version == 2 and load_profile(write_profile(model, tmp_path / "p.json")) == model
    (share,) = model.waiting
    assert (share.measured_us, share.transfer_us, share.waiting_fraction) == (200.0, 100.0, 0.5)
    est = ProfileEstimator(model)
    assert est.collective_us("all_reduce", 2, 4096) == 50.0
    assert ("profile: 50.0% of the calibration traces' NCCL kernel time was waiting for other ranks, not "
            "transfer (all_reduce 50.0% (matched across ranks)); collectives are costed by transfer time") in est.notes
