import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.ops.plan import (
    ROUTER_ARRIVALS_PER_S,
    ROUTER_CPU_MS_PER_CALL,
    bucket_cost_factors,
    effective_workers,
    parse_mix,
    parse_window,
    partition_warnings,
    partitions_for,
    partitions_setting,
    plan,
    plan_routers,
    rtfx_from_metrics,
)

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


def test_partitions_are_shared_evenly_by_every_worker_count_they_are_sized_for() -> None:
    # Kafka assigns whole partitions: the busiest of 4 workers over 6 holds 2, the pace of 3 workers
    assert effective_workers(4, 6) == 3.0 and effective_workers(4, 8) == 4.0 and effective_workers(5, 8) == 4.0
    assert effective_workers(16, 6) == 6.0 and effective_workers(0, 6) == 0.0  # more workers than partitions idle
    assert [partitions_for(w) for w in (1, 2, 3, 4, 5, 16)] == [6, 6, 6, 8, 10, 32]
    assert partitions_for(4, 5) == 20 and partitions_for(4, 16) == 32  # also even after a scale-out
    assert all(effective_workers(w, partitions_for(4, 5, 8)) == w for w in (4, 5, 8))


def test_the_plan_warns_where_the_topics_partitions_hold_its_workers_back() -> None:
    result = plan(10_000, parse_window("6h"), 450.0, parse_mix("long=1", BUCKETS))
    long = result.buckets[2]
    assert long.workers == 6 and long.partitions == 12
    assert partition_warnings(result, dict.fromkeys(BUCKETS, 6)) == []  # 6 over 6: one each
    busy = plan(14_000, parse_window("6h"), 450.0, parse_mix("long=1", BUCKETS))
    assert busy.buckets[2].workers == 8 and busy.buckets[2].partitions == 16
    (warning,) = partition_warnings(busy, dict.fromkeys(BUCKETS, 6))
    assert warning.startswith("long: 8 workers over 6 partitions work at the pace of 6 ")
    assert "raise audio.bucket.long to 16 partitions" in warning
    current = {"audio.arrivals": 12}
    assert partitions_setting(busy, dict.fromkeys(BUCKETS, 6), current) == {"audio.arrivals": 12, "audio.bucket.long": 16}
    assert partitions_setting(busy, {**dict.fromkeys(BUCKETS, 6), "long": 16}, current) == current  # nothing to raise


def test_the_plan_pays_each_buckets_batching_costs() -> None:
    # the engine's model for stereo calls spread over each bucket: a medium call (30-120 s) rounds its
    # last window up on ~a third of its computed seconds, a long one (120-600 s) on ~8 %
    factors = bucket_cost_factors((30.0, 120.0, 600.0), BUCKETS, 450.0)
    assert factors["medium"] == pytest.approx(1.341, abs=0.001) and factors["long"] == pytest.approx(1.082, abs=0.001)
    assert factors["short"] > factors["medium"] > factors["long"] > factors["xlong"] > 1.0
    window = parse_window("6h")  # 4.2 h usable: 1890 audio h per device at 450x
    audio_only = plan(1800, window, 450.0, parse_mix("medium=1", BUCKETS))
    assert audio_only.buckets[1].workers == 1 and audio_only.busy_s == pytest.approx(1800 * 3600 / 450)
    paid = plan(1800, window, 450.0, parse_mix("medium=1", BUCKETS), cost_factors=factors)
    # 1800 h cost 1800 x 1.341 = 2414 h of the device's time: past one device's 1890 h, so two workers
    assert paid.buckets[1].workers == 2 and paid.buckets[1].partitions == 6
    assert paid.busy_s == pytest.approx(1800 * 3600 * factors["medium"] / (450 * 2), rel=1e-4)
    one = plan(1400, window, 450.0, parse_mix("medium=1", BUCKETS), cost_factors=factors)
    assert one.buckets[1].workers == 1 and one.busy_s == pytest.approx(1400 * 3600 * 1.341 / 450, rel=1e-3)
    with pytest.raises(ValueError):
        plan(1, window, 450.0, parse_mix(None, BUCKETS), cost_factors={"long": 0.0})


def test_rtfx_from_worker_counters() -> None:
    assert rtfx_from_metrics({"callqa_asr_audio_seconds_total": 3000.0,
                              "callqa_asr_engine_busy_seconds_total": 10.0}) == 300.0
    with pytest.raises(ValueError):
        rtfx_from_metrics({})


# --- router sizing -------------------------------------------------------------------------------


def test_routers_for_a_burst_of_100k_in_60_s() -> None:
    # 100,000 / 60 s = 1,667 arrivals/s; at 165/s per router: ceil(10.1) = 11 routers, 11 partitions
    routers = plan_routers(100_000, 60.0, arrivals_partitions=24, per_router_arrivals_per_s=165.0,
                           cpu_ms_per_call=2.59)
    assert routers.arrivals_per_s_needed == pytest.approx(1666.7, abs=0.1)
    assert routers.routers == 11 and routers.partitions_needed == 11
    assert routers.routers * routers.per_router_arrivals_per_s >= routers.arrivals_per_s_needed
    assert routers.cpu_cores == pytest.approx(1666.7 * 2.59 / 1000, abs=0.01)  # 4.3 cores while routing
    assert routers.routed_in_s == pytest.approx(100_000 / (11 * 165.0), abs=0.1) and routers.routed_in_s <= 60
    assert routers.warning is None  # 24 partitions are enough


def test_more_routers_than_arrivals_partitions_is_warned() -> None:
    routers = plan_routers(100_000, 60.0, arrivals_partitions=6)
    assert routers.routers == 11 and routers.arrivals_partitions == 6
    assert routers.warning is not None and "6 partitions" in routers.warning and "11" in routers.warning
    # only 6 can be busy: the burst takes 100,000 / (6 x 165) s, past the 60 s target
    assert routers.routed_in_s == pytest.approx(100_000 / (6 * 165.0), abs=0.1)
    assert plan_routers(500, 60.0, arrivals_partitions=6).warning is None


def test_router_defaults_and_a_spread_arrival_rate() -> None:
    assert ROUTER_ARRIVALS_PER_S == 165.0 and ROUTER_CPU_MS_PER_CALL == 2.59  # tools/bench_router.py
    small = plan_routers(1000, 60.0, arrivals_partitions=6)
    assert small.per_router_arrivals_per_s == 165.0 and small.cpu_ms_per_call == 2.59
    assert small.routers == 1 and small.within_s == 60.0
    # 100,000 calls arriving evenly over 6 h: 4.6 arrivals/s, one router
    spread = plan_routers(100_000, parse_window("6h"), arrivals_partitions=6)
    assert spread.routers == 1 and spread.arrivals_per_s_needed == pytest.approx(4.63, abs=0.01)
    assert plan_routers(0, 60.0, arrivals_partitions=6).routers == 0
    # a rate above one core per process is not believed: a router is one Python process
    capped = plan_routers(10_000, 10.0, arrivals_partitions=64, per_router_arrivals_per_s=1000.0, cpu_ms_per_call=2.5)
    assert capped.per_router_arrivals_per_s == 400.0 and capped.routers == 3
    with pytest.raises(ValueError):
        plan_routers(100, 0.0, arrivals_partitions=6)
    with pytest.raises(ValueError):
        plan_routers(100, 60.0, arrivals_partitions=0)


def test_plan_json_and_text_report_the_routers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no settings file around
    args = ["plan", "--hours-per-day", "2000", "--rtfx-per-device", "450", "--calls-per-day", "100000"]
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    routers = json.loads(out.output)["routers"]
    assert routers["routers"] == 11 and routers["arrivals_partitions"] == 6  # the catalog's audio.arrivals
    assert routers["within_s"] == 60.0 and "6 partitions" in routers["warning"]
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "11 router process(es)" in text.output and "warning" in text.output
    without = CliRunner().invoke(app, ["plan", "--hours-per-day", "2000", "--rtfx-per-device", "450", "--json"])
    assert json.loads(without.output)["routers"] is None


def test_plan_from_the_benchmarks_rtfx_adds_the_batching_costs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["plan", "--hours-per-day", "2000", "--rtfx-per-device", "450", "--json"])
    data = json.loads(out.output)
    long = next(b for b in data["buckets"] if b["bucket"] == "long")
    assert long["cost_factor"] == pytest.approx(1.082, abs=0.001)
    assert data["busy_s"] == pytest.approx(900 * 3600 * long["cost_factor"] / 450, rel=1e-4)  # not 900 h / 450x
    text = CliRunner().invoke(app, ["plan", "--hours-per-day", "2000", "--rtfx-per-device", "450"])
    assert "x1.08 batching" in text.output and "done in 2.17 h" in text.output
