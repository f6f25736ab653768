"""Collective fits on transfer time and the waiting shares per collective type."""

from __future__ import annotations

import pytest

from commopt.estimators.kineto import parse_trace
from commopt.estimators.transfer import fit_transfer
from tests.estimators.traces import parse_all, rank_trace, write

_R0 = [("allreduce", 1024, 0, 150), ("allreduce", 4096, 400, 700), ("broadcast", 64, 800, 830)]
_R1 = [("allreduce", 1024, 100, 150), ("allreduce", 4096, 500, 700), ("broadcast", 64, 805, 830)]


def test_matched_ranks_fit_transfer_and_say_how_much_was_waiting(tmp_path):
    fitted = fit_transfer(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(1, 2, _R1)]))
    ar, bc = fitted.fits
    assert (ar.type, ar.fitted_on, [(p.size_bytes, p.time_us, p.count) for p in ar.points]) == \
        ("all_reduce", "transfer", [(4096, 50.0, 2), (16384, 200.0, 2)])
    assert ar.how.startswith("transfer matched across 2 ranks; ")
    w_ar, w_bc = fitted.waiting
    # all_reduce: 150 + 300 + 50 + 200 us measured, 2 x (50 + 200) transfer
    assert (w_ar.measured_us, w_ar.transfer_us, w_ar.waiting_us) == (700.0, 500.0, 200.0)
    assert w_ar.waiting_fraction == pytest.approx(2 / 7) and w_ar.method == "matched across ranks"
    assert (w_bc.type, w_bc.transfer_us, w_bc.waiting_us) == ("broadcast", 50.0, 5.0)


def test_one_rank_fits_a_lower_envelope_and_estimates_its_waiting(tmp_path):
    # two steps of one rank: the 4096-element all_reduce waited 400 us in step 2
    steps = [rank_trace(0, 2, [("allreduce", 1024, 0, 50), ("allreduce", 4096, 100, 300)], step=1),
             rank_trace(0, 2, [("allreduce", 1024, 0, 60), ("allreduce", 4096, 100, 700)], step=2)]
    fitted = fit_transfer([parse_trace(write(tmp_path / f"step{i}.json", t)) for i, t in enumerate(steps)])
    (fit,) = fitted.fits
    assert fit.fitted_on == "lower envelope" and [p.time_us for p in fit.points] == [50.0, 200.0]
    (share,) = fitted.waiting
    assert share.method == "lower envelope"
    assert (share.measured_us, share.transfer_us) == (50 + 200 + 60 + 600, 50 + 200 + 50 + 200)
    assert any("one rank's trace: collective transfer times are a lower envelope" in n for n in fitted.notes)


def test_a_partial_group_takes_the_envelope_of_its_upper_bounds(tmp_path):
    fitted = fit_transfer(parse_all(tmp_path, [rank_trace(0, 4, _R0), rank_trace(1, 4, _R1)]))
    assert "2 of 4 ranks (upper bounds), their lower envelope" in fitted.fits[0].how
