"""Matching collectives across ranks' traces: transfer = end - latest rank's start."""

from __future__ import annotations

import pytest

from commopt.estimators.kineto import parse_trace
from commopt.estimators.waiting import match_collectives
from tests.estimators.traces import SHARED_TRACES, parse_all, rank_trace

# two all_reduces; rank 1 reaches each 100 us after rank 0; both end together
_R0 = [("allreduce", 1024, 0, 150), ("allreduce", 4096, 400, 700)]
_R1 = [("allreduce", 1024, 100, 150), ("allreduce", 4096, 500, 700)]


def test_transfer_is_the_end_minus_the_latest_start(tmp_path):
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(1, 2, _R1)]))
    assert not m.unmatched and not m.notes and len(m.matched) == 2
    first, second = m.matched
    assert (first.ranks, first.transfer_us, first.waiting_us) == ((0, 1), (50.0, 50.0), (100.0, 0.0))
    assert second.transfer_us == (200.0, 200.0) and second.waiting_us == (100.0, 0.0) and second.complete
    assert [s.duration_us for s in m.transfer_samples()] == [50.0, 50.0, 200.0, 200.0]


def test_clocks_are_aligned_on_the_collectives_ends(tmp_path):
    # rank 1's clock runs 5 ms ahead: raw timestamps would make rank 1 the latest by far
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(1, 2, _R1, clock_offset=5000)]))
    assert [x.transfer_us for x in m.matched] == [(50.0, 50.0), (200.0, 200.0)]
    assert m.clock_offsets_us[1] - m.clock_offsets_us[0] == 5000


def test_different_sequences_are_not_matched(tmp_path):
    dropped = [_R1[1]]  # rank 1's trace lost its first collective (sampled traces drop events)
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(1, 2, dropped)]))
    assert not m.matched and len(m.unmatched) == 3
    assert any("record different collective sequences" in n for n in m.notes)


def test_kernels_that_do_not_overlap_in_time_are_not_one_collective(tmp_path):
    r0 = [*_R0, ("allreduce", 64, 1000, 1010)]
    r1 = [*_R1, ("allreduce", 64, 5000, 5010)]  # ends 4 ms after rank 0's ended
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, r0), rank_trace(1, 2, r1)]))
    assert not m.matched and len(m.unmatched) == 6
    assert any("do not overlap in time" in n for n in m.notes)


def test_ranks_that_do_not_finish_together_still_match(tmp_path):
    """Two gloo ranks on a loaded 2-core machine (a real run, times relative): a rank's worker
    thread may end a collective milliseconds after the other's. Aligned on the ends alone
    (median: 1.9 ms apart), rank 1's whole 255 us kernel of the fourth collective fell
    before rank 0's start and the step was dropped as "not overlapping"; the clocks (one
    machine: no offset at all) must stay within what every collective's kernels allow."""
    r0 = [(0, 39162), (40026, 44009), (103526, 155205), (155920, 159020), (206501, 259311), (259990, 271335)]
    r1 = [(35019, 43137), (43664, 43985), (146333, 155192), (156523, 156778), (255068, 263072), (265674, 275070)]
    sizes = [1024, 4096] * 3
    traces = [rank_trace(r, 2, [("allreduce", n, a, b) for n, (a, b) in zip(sizes, ends, strict=True)])
              for r, ends in ((0, r0), (1, r1))]
    m = match_collectives(parse_all(tmp_path, traces))
    assert not m.unmatched and not m.notes and len(m.matched) == 6
    gap = m.clock_offsets_us[0] - m.clock_offsets_us[1]
    assert -858 <= gap <= 345  # the only offsets under which all six overlap (0 among them)
    for x in m.matched:  # each rank's kernel overlaps the other's once aligned
        (a, b) = x.samples
        assert a.end_us - m.clock_offsets_us[0] >= b.start_us - m.clock_offsets_us[1]
        assert b.end_us - m.clock_offsets_us[1] >= a.start_us - m.clock_offsets_us[0]


def test_traces_must_name_distinct_ranks(tmp_path):
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(0, 2, _R1)]))
    assert not m.matched and len(m.unmatched) == 4 and "do not name distinct ranks" in m.notes[0]
    one = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0)]))
    assert not one.matched and len(one.unmatched) == 2 and not one.notes


def test_a_partial_group_gives_upper_bounds(tmp_path):
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 4, _R0), rank_trace(1, 4, _R1)]))
    assert m.matched and not any(x.complete for x in m.matched)
    assert any("2 of its 4 ranks given" in n and "upper bounds" in n for n in m.notes)


def test_message_sizes_must_agree_except_all_to_all(tmp_path):
    r1 = [("allreduce", 2048, 100, 150), _R1[1]]
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, _R0), rank_trace(1, 2, r1)]))
    assert not m.matched
    a0 = [("all_to_allv", 100, 0, 150)]
    a1 = [("all_to_allv", 300, 100, 150)]  # splits differ per rank
    m = match_collectives(parse_all(tmp_path, [rank_trace(0, 2, a0), rank_trace(1, 2, a1)]))
    assert [x.transfer_us for x in m.matched] == [(50.0, 50.0)]


@pytest.mark.skipif(not (SHARED_TRACES / "param" / "dlrm_kineto").is_dir(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_eight_rank_traces_are_mostly_waiting():
    traces = [parse_trace(f) for f in sorted((SHARED_TRACES / "param" / "dlrm_kineto").glob("worker*.json.gz"))]
    m = match_collectives(traces)
    # every rank's 8 collectives (5 all_to_all, 3 all_reduce) found on all 8 ranks
    assert not m.unmatched and len(m.matched) == 8 and all(x.ranks == tuple(range(8)) for x in m.matched)
    assert all(abs(o) <= 2 for o in m.clock_offsets_us.values())  # one host: clocks agree to 2 us
    measured = sum(s.duration_us for x in m.matched for s in x.samples)
    waiting = sum(sum(x.waiting_us) for x in m.matched)
    assert 0.95 < waiting / measured < 0.98
    # the first all_to_all: rank 7 started last, 10 us before the end; rank 1 waited 7.6 ms
    first = m.matched[0]
    assert first.transfer_us[7] == pytest.approx(10, abs=2) and first.waiting_us[1] > 7000


@pytest.mark.skipif(not (SHARED_TRACES / "hta" / "sampled_rank-0.json.gz").is_file(), reason="no real traces (set COMMOPT_TRACES)")
def test_real_traces_with_dropped_events_match_only_what_agrees():
    traces = [parse_trace(SHARED_TRACES / "hta" / f"sampled_rank-{r}.json.gz") for r in (0, 1)]
    m = match_collectives(traces)
    # the all_gathers (their own stream) match; the other stream's steps lost different events
    assert {x.samples[0].type for x in m.matched} == {"all_gather"} and len(m.matched) == 2
    assert sum("record different collective sequences" in n for n in m.notes) == 2
    assert any("2 of its 64 ranks given" in n for n in m.notes)


def test_samples_without_a_start_time_stay_unmatched_not_lost():
    from commopt.estimators.kineto import CollectiveSample, KinetoTrace

    def trace(rank):
        t = KinetoTrace(path=f"r{rank}", device="gpu", world_size=2, rank=rank)
        t.collectives = [CollectiveSample("all_reduce", 2, 4096, 10.0, 1, "kernel args", "0")]
        return t

    m = match_collectives([trace(0), trace(1)])
    assert not m.matched and len(m.unmatched) == 2
