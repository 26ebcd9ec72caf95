"""`window_segments`: where one clocked window went, from a worker's own stamps and the parent's clock.
Diagnostics only (a candidate's stamps are its claim), but they found the harness's 0.3 ms a round on the
GPU (session 15), so they must be right and must never break a verdict when a worker sends nonsense."""

from __future__ import annotations

import math

from verifier.clock.rounds import WINDOW_SEGMENTS, mark_read_at, window_segments


def test_segments_are_the_gaps_between_the_stamps_in_order():
    sent, got = 100.0, 100.010
    stamps = [100.001, 100.002, 100.004, 100.008, 100.0085]
    segs = window_segments(sent, stamps, 100.009, got)
    assert len(segs) == len(WINDOW_SEGMENTS) == 7
    assert [round(s, 3) for s in segs] == [1.0, 1.0, 2.0, 4.0, 0.5, 0.5, 1.0]
    assert math.isclose(sum(segs), (got - sent) * 1e3, abs_tol=1e-3)


def test_a_missing_reader_time_puts_the_rest_in_the_last_parts():
    segs = window_segments(0.0, [0.001, 0.002, 0.003, 0.004, 0.005], None, 0.006)
    assert segs[-2] == 1.0 and segs[-1] == 0.0


def test_malformed_stamps_give_nothing_rather_than_an_error():
    for bad in (None, [], [1, 2, 3], ["a", 1, 2, 3, 4], {"x": 1}, [1, 2, 3, 4, 5, 6]):
        assert window_segments(0.0, bad, None, 1.0) == []


def test_the_reader_time_is_found_by_identity_not_by_equality():
    class Job:
        pass

    job = Job()
    first, second = {"phase": "timing_end"}, {"phase": "timing_end"}
    job.marks = [(1.0, first), (2.0, second)]
    assert mark_read_at(job, first) == 1.0 and mark_read_at(job, second) == 2.0
    assert mark_read_at(job, {"phase": "timing_end"}) is None
    assert mark_read_at(object(), first) is None
