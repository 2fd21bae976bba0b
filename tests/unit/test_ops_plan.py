import pytest

from pipeline.ops.plan import parse_mix, parse_window, plan, rtfx_from_metrics

BUCKETS = ("short", "medium", "long", "xlong")


def test_window_and_mix_parsing() -> None:
    assert parse_window("6h") == 21600 and parse_window("90m") == 5400 and parse_window("6h30m") == 23400
    assert parse_window("6") == 21600
    with pytest.raises(ValueError):
        parse_window("six hours")
    assert parse_mix("short=1,long=3", BUCKETS) == {"short": 0.25, "medium": 0.0, "long": 0.75, "xlong": 0.0}
    assert sum(parse_mix(None, BUCKETS).values()) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        parse_mix("huge=1", BUCKETS)


def test_plan_fits_the_day_in_the_window_with_the_margin() -> None:
    # 10,000 audio hours, 6 h window, 30 % margin, 500x per device: 10000 / (500 * 4.2) = 4.76 -> per bucket
    result = plan(10_000, parse_window("6h"), 500.0, parse_mix("short=1,medium=1,long=1,xlong=1", BUCKETS), 0.3)
    assert [b.workers for b in result.buckets] == [2, 2, 2, 2]  # 2500 h each / 2100 h per device
    assert result.devices == 8 and all(b.partitions == 6 for b in result.buckets)
    assert result.busy_s <= result.window_s * 0.7
    big = plan(100_000, parse_window("6h"), 500.0, parse_mix("long=1", BUCKETS))
    assert big.buckets[2].workers == 48 and big.buckets[2].partitions == 96 and big.buckets[0].workers == 0


def test_rtfx_from_worker_counters() -> None:
    assert rtfx_from_metrics({"callqa_asr_audio_seconds_total": 3000.0,
                              "callqa_asr_engine_busy_seconds_total": 10.0}) == 300.0
    with pytest.raises(ValueError):
        rtfx_from_metrics({})
