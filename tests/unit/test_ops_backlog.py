"""Health state, progress stamps, backlog arithmetic, throughput and the night-window verdict (pure)."""

import statistics
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.headers import AUDIO, CUM_AUDIO, PartitionProgress, Stamp, header, int_header
from pipeline.ops.lag import RateTracker, record_members, record_samples, summarize, verdict
from pipeline.ops.times import next_clock_time
from pipeline.runtime.backlog import PartitionPosition, partition_backlog
from pipeline.runtime.health import StageHealth
from tests.fakes import FakeClock


def test_health_is_not_ready_before_assignment_and_not_live_when_the_loop_stops() -> None:
    clock = FakeClock()
    health = StageHealth("asr-short", liveness_limit_s=30, clock=clock)
    assert not health.readiness().ok and health.readiness().status == 503
    assert not health.liveness().ok  # never beat
    health.assigned([("t", 0), ("t", 1)])
    assert health.readiness().ok and health.liveness().ok
    health.revoked([("t", 0)])
    assert health.readiness().detail["assigned_partitions"] == 1
    clock.t += 31
    assert not health.liveness().ok and health.liveness().detail["last_beat_age_s"] == 31
    health.replace_assignment([])
    assert not health.readiness().ok and health.liveness().ok


def test_stamps_round_trip_and_totals_resume_after_recovery() -> None:
    progress = PartitionProgress()
    first = progress.stamp("b", 0, 12.5, lane=3)
    second = progress.stamp("b", 0, 7.25, lane=3)
    assert (second.cum_audio_s, second.cum_calls, second.before_audio_s, second.lane) == (19.75, 2, 12.5, 3)
    assert Stamp.from_headers(second.to_headers()) == second
    assert Stamp.from_headers(progress.stamp("b", 1, 1.0).to_headers()).lane is None  # a stamp from before lanes
    assert Stamp.from_headers([(CUM_AUDIO, b"1.0")]) is None  # partial stamps are not stamps
    restarted = PartitionProgress()
    restarted.recover("b", 0, second)
    restarted.recover("b", 0, first)  # an older stamp never moves totals back
    assert restarted.stamp("b", 0, 1.0, lane=3).cum_calls == 3
    assert restarted.stamp("b", 0, 1.0, lane=4).cum_calls == 1  # another lane: its own totals
    restarted.forget([3])  # the lane moved to another router
    assert restarted.stamp("b", 0, 1.0, lane=3).cum_calls == 1
    assert restarted.stamp("b", 0, 1.0, lane=4).cum_calls == 2
    assert header({"x": b"1", AUDIO: b"2.5"}, AUDIO) == "2.5"
    assert int_header([("callqa-redrive-attempt", b"nope")], "callqa-redrive-attempt") == 0


def test_backlog_from_two_stamps_equals_the_sum_of_the_durations_between() -> None:
    progress = PartitionProgress()
    durations = [10.0, 20.0, 30.0, 40.0, 50.0]
    stamps = [progress.stamp("b", 0, d, lane=0) for d in durations]
    # offsets 0..4 data, 5 a transaction marker: end (last stable offset) 6; the group committed 2
    pos = PartitionPosition("b", 0, committed=2, low=0, end=6)
    row = partition_backlog("asr-short", "g", pos, ahead={0: stamps[2]}, last={0: stamps[-1]})
    assert (row.messages, row.audio_s, row.consumed_audio_s, row.exact) == (3, 120.0, 30.0, True)
    caught_up = partition_backlog("asr-short", "g", PartitionPosition("b", 0, 6, 0, 6), {}, {0: stamps[-1]})
    assert (caught_up.messages, caught_up.audio_s, caught_up.consumed_audio_s) == (0, 0.0, 150.0)
    never_used = partition_backlog("asr-short", "g", PartitionPosition("b", 1, None, 0, 0), {}, {})
    assert (never_used.messages, never_used.audio_s, never_used.consumed_audio_s) == (0, 0.0, 0.0)
    caught_up_plain = partition_backlog("qa", "g", PartitionPosition("t", 0, 9, 0, 9), {}, {}, stamped=False)
    assert (caught_up_plain.messages, caught_up_plain.audio_s) == (0, None)
    unstamped = partition_backlog("router", "g", PartitionPosition("a", 0, None, 4, 9), {}, {})
    assert (unstamped.messages, unstamped.audio_s, unstamped.exact) == (5, None, False)


def test_routers_writing_one_partition_each_keep_their_own_lane_and_the_backlog_sums_the_lanes() -> None:
    # Two routers interleave into one bucket partition, each stamping the lane of its arrivals
    # partition; the group has consumed offsets 0..3. Per-partition totals of each router read 1/2.
    routers = {0: PartitionProgress(), 1: PartitionProgress()}
    durations = [(0, 10.0), (1, 20.0), (0, 30.0), (1, 40.0), (0, 50.0), (1, 60.0), (1, 70.0), (0, 80.0)]
    stamps = [(lane, routers[lane].stamp("b", 0, d, lane)) for lane, d in durations]
    committed = 4
    ahead = {}
    for lane, stamp in stamps[committed:]:
        ahead.setdefault(lane, stamp)
    last = {lane: stamp for lane, stamp in stamps}
    row = partition_backlog("asr-short", "g", PartitionPosition("b", 0, committed, 0, 9), ahead, last)
    assert (row.messages, row.audio_s, row.exact) == (4, 260.0, True)  # 50 + 60 + 70 + 80
    assert row.consumed_audio_s == 100.0 and row.consumed_by_lane == {0: 40.0, 1: 60.0}
    # Committed 6: lane 1's first record after it is offset 6, lane 0's is offset 7.
    later = partition_backlog("asr-short", "g", PartitionPosition("b", 0, 6, 0, 9),
                              {1: stamps[6][1], 0: stamps[7][1]}, {0: stamps[7][1], 1: stamps[6][1]})
    assert (later.messages, later.audio_s, later.consumed_by_lane) == (2, 150.0, {0: 90.0, 1: 120.0})
    # A lane possibly missing (read back no further than a cap): a lower bound, inexact.
    capped = partition_backlog("asr-short", "g", PartitionPosition("b", 0, committed, 0, 9), {1: ahead[1]},
                               {1: last[1]}, complete=False, every_lane=False)
    assert (capped.messages, capped.audio_s, capped.exact, capped.consumed_audio_s) == (5, 130.0, False, None)


def test_rate_is_the_slope_over_the_window_and_a_reset_starts_over() -> None:
    tracker = RateTracker(window_s=60, min_span_s=2)
    tracker.add("k", 0.0, 0.0)
    assert tracker.rate("k") is None
    for t in range(10, 130, 10):
        tracker.add("k", float(t), t * 5.0)
    assert tracker.rate("k") == pytest.approx(5.0)
    assert tracker.samples["k"][0][0] >= 60  # old samples dropped
    tracker.add("k", 130.0, 1.0)  # offsets moved back (a reset): no negative rate
    assert tracker.rate("k") is None


def test_time_before_the_group_moved_in_the_window_is_not_counted_in_its_rate() -> None:
    tracker = RateTracker(window_s=300, min_span_s=2)
    for t in (0.0, 10.0, 20.0):  # workers joining: nothing consumed yet
        tracker.add("k", t, 0.0)
    assert tracker.rate("k") == 0.0  # never moved: stalled
    for t in (30.0, 40.0):
        tracker.add("k", t, (t - 20.0) * 5.0)
    assert tracker.rate("k") == pytest.approx(5.0)  # from t=20, not 1.25 from t=0
    tracker.add("k", 50.0, 100.0)  # a stall after it moved counts: the line through 0, 50, 100, 100
    assert tracker.rate("k") == pytest.approx(3.5)


def test_the_rate_of_a_value_moving_in_batch_steps_is_not_off_by_a_batch_at_each_end() -> None:
    # 100 audio s/s, committed in batches of 400 every 4 s; sampled every 6 s, the first sample just
    # after a commit and the last just before one: the end samples alone give 93.4 (a batch short),
    # the fitted line 97.0
    tracker = RateTracker(window_s=300, min_span_s=2)
    for i in range(11):
        t = 0.01 + 6.0 * i - (0.02 if i == 10 else 0.0)
        tracker.add("k", t, 400.0 * (t // 4.0))
    (t0, v0), (t1, v1) = tracker.samples["k"][0], tracker.samples["k"][-1]
    assert (v1 - v0) / (t1 - t0) == pytest.approx(93.4, abs=0.1)
    assert tracker.rate("k") == pytest.approx(97.0, abs=0.1)


def test_verdict_against_the_window_end() -> None:
    now = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    end = next_clock_time("06:00Z", now)
    assert end == datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    assert next_clock_time("23:30Z", now) == datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    on_track = verdict(3600 * 100, 20.0, now, end)  # 100 audio hours at 20x: 5 h, 2 h spare
    assert on_track.status == "on track" and on_track.margin_s == pytest.approx(7200)
    late = verdict(3600 * 200, 20.0, now, end)  # 10 h: 3 h late
    assert late.status == "at risk" and late.text() == "at risk: 3h00m late"
    assert verdict(0, None, now, end).status == "done"
    assert verdict(10, 0.0, now, end).status == "stalled"
    assert verdict(10, None, now, end).status == "no rate yet"
    with pytest.raises(ValueError):
        next_clock_time("6am", now)


def test_summary_sums_partitions_and_uses_measured_rates() -> None:
    tracker = RateTracker(min_span_s=1)
    t0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    rows = lambda consumed: [  # noqa: E731
        partition_backlog("asr-short", "g", PartitionPosition("b", p, 0, 0, 10), {0: Stamp(c + 1, 1, 1.0, 0)},
                          {0: Stamp(1000, 10, 1, 0)})
        for p, c in enumerate(consumed)]
    record_samples(tracker, rows([0.0, 0.0]), 0.0)
    later = rows([100.0, 300.0])
    record_samples(tracker, later, 10.0)
    [summary] = summarize(later, tracker, t0 + timedelta(seconds=10), next_clock_time("06:00Z", t0))
    assert summary.rate == pytest.approx(40.0)  # (100 + 300) audio s in 10 s
    assert summary.audio_s == pytest.approx(1600.0)
    assert summary.verdict.status == "on track" and summary.verdict.eta_s == pytest.approx(40.0)


def _lanes_row(consumed: dict[int, float], stage: str = "asr-short"):  # noqa: ANN202
    """Partition 0 of group g with each lane's audio consumed before the committed offset."""
    ahead = {lane: Stamp(c + 1, 1, 1.0, lane) for lane, c in consumed.items()}
    return partition_backlog(stage, "g", PartitionPosition("b", 0, 0, 0, 10), ahead,
                             {lane: Stamp(5000, 50, 1, lane) for lane in consumed})


def test_the_rate_sums_the_lanes_sampled_now_and_a_lane_gone_idle_stops_counting() -> None:
    tracker = RateTracker(min_span_s=1)
    t0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)

    record_samples(tracker, [_lanes_row({0: 0.0, 1: 0.0})], 0.0)
    record_samples(tracker, [_lanes_row({0: 100.0, 1: 50.0})], 10.0)
    assert summarize([_lanes_row({0: 100.0, 1: 50.0})], tracker, t0, None)[0].rate == pytest.approx(15.0)
    # Lane 1 has nothing left after the committed offset: only lane 0 is found, and counts.
    now = _lanes_row({0: 200.0})
    record_samples(tracker, [now], 20.0)
    assert summarize([now], tracker, t0, None)[0].rate == pytest.approx(10.0)


def test_a_lane_that_waited_its_turn_is_measured_over_the_group_s_time_not_its_own() -> None:
    # One worker, two lanes in its partition: lane 0 consumed at 5 audio s/s from t=0, lane 1 waited
    # and got its first batch (100 s) at t=60. The group consumed 400 s in 60 s. Lane 1 measured from
    # its own first move read 10/s, the group 15/s, and the ETA came out at less than half.
    tracker = RateTracker(min_span_s=1)
    t0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)

    def row(consumed: dict[int, float]):  # noqa: ANN202
        return _lanes_row(consumed, "asr-long")

    for t in range(0, 70, 10):
        record_samples(tracker, [row({0: 5.0 * t, 1: 100.0 if t == 60 else 0.0})], float(t))
    now = row({0: 300.0, 1: 100.0})
    # lane 1's fitted line over 0..60 s: 30 * 100 / 2800 = 1.07/s; with lane 0's 5/s, 6.07 (true: 6.67)
    assert summarize([now], tracker, t0, None)[0].rate == pytest.approx(5.0 + 3000 / 2800)


def test_after_a_worker_is_added_the_rate_is_measured_from_the_change() -> None:
    # One worker at 10 audio s/s for 100 s; a second joins at 110 s, the rebalance pauses the group
    # until 120 s, then the two run at 20/s. The window's fitted line would follow the new pace only as
    # the window slides; measured from where the group moved again, it is the new pace three samples on.
    tracker = RateTracker(window_s=300, min_span_s=1)
    t0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)

    def row(consumed: float):  # noqa: ANN202
        return _lanes_row({0: consumed}, "asr-long")

    def consumed(t: float) -> float:
        return 10.0 * t if t <= 100 else 1000.0 + 20.0 * max(0.0, t - 120)

    def sample(t: float, members: int) -> float | None:
        record_samples(tracker, [row(consumed(t))], t)
        record_members(tracker, {"g": members}, t)
        return summarize([row(consumed(t))], tracker, t0, None)[0].rate

    def window_line(until: int) -> float:
        ts = [float(t) for t in range(0, until + 1, 10)]
        return statistics.linear_regression(ts, [consumed(t) for t in ts]).slope

    assert sample(0.0, 1) is None  # one sample: no rate yet
    for t in range(10, 101, 10):
        assert sample(float(t), 1) == pytest.approx(10.0)
    assert tracker.members_changed_at("g") is None
    assert sample(110.0, 2) == pytest.approx(window_line(110))  # joined, nothing moved since: the window's
    assert tracker.members_changed_at("g") == 110.0
    assert sample(120.0, 2) == pytest.approx(window_line(120))
    assert sample(130.0, 2) == pytest.approx(window_line(130))  # moved again from 120: two samples, too few
    assert sample(140.0, 2) == pytest.approx(20.0)  # three: the new pace
    assert summarize([row(consumed(140.0))], tracker, t0, None)[0].members == 2
    # members not known (the describe failed): no change is seen, the window's line is used
    blind = RateTracker(window_s=300, min_span_s=1)
    record_members(blind, {"g": None}, 0.0)
    assert blind.members_changed_at("g") is None and blind.members_now("g") is None
