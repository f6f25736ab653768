"""Compute slowdown beside communication, measured on traces."""

from __future__ import annotations

import pytest

from commopt.errors import OptionError
from commopt.estimators.kineto import parse_trace
from commopt.estimators.slowdown import applied_slowdown, compute_slowdown
from tests.estimators.traces import SHARED_TRACES, parse_all, rank_trace, write

_NCCL = [("allreduce", 1 << 20, 1000, 2000)]


def test_the_same_kernel_beside_communication_against_alone(tmp_path):
    compute = [("gemm", 0, 10.0), ("gemm", 100, 12.0), ("gemm", 200, 10.0),  # alone: median 10
               ("gemm", 1100, 15.0), ("gemm", 1300, 15.0),  # inside the NCCL kernel: 1.5x
               ("gemm", 1995, 20.0),  # a quarter inside: neither, not used
               ("relu", 1500, 3.0)]  # only beside: nothing to compare it with
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=compute)])
    m = compute_slowdown([trace])
    assert m.factor == pytest.approx(1.5)
    assert (m.kernel_kinds, m.overlapped_kernels, m.alone_kernels) == (1, 2, 3)


def test_kinds_are_weighted_by_their_time_beside_communication(tmp_path):
    compute = [("a", 0, 10.0), ("a", 1100, 20.0),  # 2x, 20 us beside
               ("b", 100, 10.0), ("b", 1200, 10.0), ("b", 1300, 10.0), ("b", 1400, 10.0), ("b", 1500, 10.0),
               ("b", 1600, 10.0)]  # 1x, 60 us beside
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=compute)])
    assert compute_slowdown([trace]).factor == pytest.approx(2 ** (20 / 70))


def test_nothing_to_compare_is_none(tmp_path):
    (trace,) = parse_all(tmp_path, [rank_trace(0, 2, _NCCL, compute=[("gemm", 0, 10.0)])])
    assert compute_slowdown([trace]) is None


@pytest.mark.skipif(not (SHARED_TRACES / "hta" / "nccl_data.json.gz").is_file(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_trace_compute_runs_slower_beside_nccl():
    m = compute_slowdown([parse_trace(SHARED_TRACES / "hta" / "nccl_data.json.gz")])
    assert 1.05 < m.factor < 1.25 and m.kernel_kinds >= 20


def _calibrated_model(tmp_path, compute) -> str:
    """A profile model calibrated on one hand-written trace, written to a file."""
    from commopt.estimators.profile import calibrate, write_profile

    trace_file = write(tmp_path / "rank0.json", rank_trace(0, 2, _NCCL, compute=compute))
    return str(write_profile(calibrate(trace_file), tmp_path / "model.json"))


@pytest.mark.parametrize("spec", [None, "off", "OFF", "1", "1.0", 1.0])
def test_off_and_a_factor_of_one_apply_nothing(spec):
    assert applied_slowdown(spec) is None


def test_a_factor_is_applied_as_given():
    s = applied_slowdown("1.25")
    assert (s.factor, s.source) == (1.25, "--compute-slowdown 1.25")


@pytest.mark.parametrize("spec, says", [("0.9", "factor >= 1"), ("nan", "factor >= 1"), ("inf", "factor >= 1"),
                                        ("fast", "not 'off', 'calibrated' or a factor")])
def test_a_factor_below_one_or_not_a_number_is_an_option_error(spec, says):
    with pytest.raises(OptionError, match=says) as exc:
        applied_slowdown(spec)
    assert exc.value.field == "--compute-slowdown"


def test_calibrated_applies_the_factor_the_profile_measured(tmp_path):
    model = _calibrated_model(tmp_path, [("gemm", 0, 10.0), ("gemm", 1100, 15.0)])
    s = applied_slowdown("calibrated", model)
    assert s.factor == pytest.approx(1.5)
    assert s.source.startswith("calibrated on ") and "median time of 1 kernel kind" in s.source


def test_calibrated_needs_a_profile_with_a_measurement(tmp_path):
    with pytest.raises(OptionError, match="needs --profile"):
        applied_slowdown("calibrated")
    nothing = _calibrated_model(tmp_path, [("gemm", 0, 10.0)])  # never beside an NCCL kernel
    with pytest.raises(OptionError, match="no compute slowdown measurement") as exc:
        applied_slowdown("calibrated", nothing)
    assert exc.value.file == nothing


def test_a_measured_factor_below_one_is_not_applied(tmp_path):
    faster = _calibrated_model(tmp_path, [("gemm", 0, 10.0), ("gemm", 1100, 9.0)])
    with pytest.raises(OptionError, match="below 1"):
        applied_slowdown("calibrated", faster)


def test_the_chain_carries_the_slowdown_its_options_ask_for(tmp_path):
    from commopt.estimators import EstimatorOptions, resolve

    model = _calibrated_model(tmp_path, [("gemm", 0, 10.0), ("gemm", 1100, 12.0)])
    chain = resolve(options=EstimatorOptions(estimator="profile,analytical", profile=model,
                                             compute_slowdown="calibrated"))
    assert chain.compute_slowdown == pytest.approx(1.2)
    assert resolve(options=EstimatorOptions()).compute_slowdown == 1.0
    # the profile only for its factor: used, so no note says it is not
    analytical = resolve(options=EstimatorOptions(profile=model, compute_slowdown="calibrated"))
    assert analytical.compute_slowdown == pytest.approx(1.2)
    assert not any("is not used" in n for n in analytical.notes)
