"""When a batch counts as hung: its expected time from audio seconds and the measured RTFx (pure)."""

import pytest

from pipeline.runtime.health import StageHealth
from pipeline.stages.deadline import BatchDeadline, RtfxEstimate, batch_limit_s, batch_overdue
from tests.fakes import FakeClock

POLICY = BatchDeadline(floor_s=60.0, factor=10.0, initial_rtfx=1.0)


@pytest.mark.parametrize(
    ("audio_s", "rtfx", "elapsed_s", "overdue"),
    [
        (600.0, 20.0, 299.0, False),  # expected 30 s, limit 300 s
        (600.0, 20.0, 301.0, True),
        (10.0, 100.0, 59.0, False),  # expected 0.1 s: the floor holds
        (10.0, 100.0, 61.0, True),
        (120.0, None, 1199.0, False),  # nothing measured yet: the initial RTFx (real time)
        (120.0, None, 1201.0, True),
        (0.0, 50.0, 59.0, False),  # an empty batch (all calls dead before compute): the floor
    ],
)
def test_a_batch_is_overdue_past_factor_times_its_expected_time_and_never_before_the_floor(
    audio_s: float, rtfx: float | None, elapsed_s: float, overdue: bool
) -> None:
    assert batch_overdue(audio_s, rtfx, elapsed_s, POLICY) is overdue


def test_the_limit_is_the_larger_of_floor_and_factor_times_expected() -> None:
    assert batch_limit_s(600.0, 20.0, POLICY) == 300.0
    assert batch_limit_s(1.0, 20.0, POLICY) == 60.0
    with pytest.raises(ValueError):
        BatchDeadline(floor_s=0.0)
    with pytest.raises(ValueError):
        BatchDeadline(factor=0.5)


def test_the_rtfx_estimate_is_the_slowest_recent_batch() -> None:
    est = RtfxEstimate(window=3)
    assert est.value is None
    est.observe(300.0, 10.0)  # 30x
    est.observe(300.0, 30.0)  # 10x: a slow batch widens the limit of the next ones
    est.observe(300.0, 6.0)  # 50x
    assert est.value == 10.0
    est.observe(300.0, 5.0)
    est.observe(300.0, 5.0)  # the slow one has left the window
    assert est.value == 50.0
    est.observe(0.0, 1.0)  # nothing to learn from
    est.observe(10.0, 0.0)
    assert est.value == 50.0


def test_health_fails_liveness_while_a_batch_runs_past_its_limit_though_the_loop_beats() -> None:
    clock = FakeClock()
    health = StageHealth("asr-short", liveness_limit_s=30, clock=clock, deadline=POLICY)
    health.beat()
    health.batch_started(audio_s=600.0, rtfx=20.0)  # limit 300 s
    for _ in range(29):  # the poll loop keeps beating while the engine computes
        clock.t += 10
        health.beat()
    probe = health.liveness()
    assert probe.ok and probe.detail["batch_elapsed_s"] == 290 and probe.detail["batch_limit_s"] == 300
    clock.t += 11
    health.beat()
    probe = health.liveness()
    assert not probe.ok and probe.status == 503 and probe.detail["batch_overdue"] is True
    health.batch_done()
    assert health.liveness().ok and health.liveness().detail["batch_elapsed_s"] is None
