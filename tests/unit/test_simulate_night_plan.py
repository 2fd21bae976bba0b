"""tools/simulate_night takes its router processes and bucket partitions from `callqa plan` unless
options override them."""

from __future__ import annotations

import pytest

from pipeline.catalog import load_catalog
from pipeline.simulated.engine import SimulatedEngineOptions, device_time
from pipeline.simulated.storage import SimulatedRecording
from pipeline.stages.routing import Buckets
from tools.simulate_night import (
    bucket_partitions,
    cost_factors,
    generate,
    ideal_device_s,
    night_plan,
    parse_args,
    router_plan,
)


def test_the_router_count_defaults_to_the_plan_for_the_nights_burst() -> None:
    # 100,000 arrivals in 60 s at 165/s per router: 11 routers, past the catalog's 6 arrivals partitions
    planned, count = router_plan(parse_args(["--calls", "100000", "--out", "x"]), arrivals_partitions=6)
    assert (planned.routers, count, planned.within_s) == (11, 11, 60.0)
    assert planned.warning is not None
    small, one = router_plan(parse_args(["--calls", "1000", "--out", "x"]), arrivals_partitions=6)
    assert (small.routers, one) == (1, 1)
    faster, _ = router_plan(
        parse_args(["--calls", "100000", "--out", "x", "--route-within-s", "30", "--router-arrivals-per-s", "300"]),
        arrivals_partitions=24,
    )
    assert faster.routers == 12  # 3,333/s at 300/s


def test_bucket_topics_are_split_evenly_over_their_workers_before_and_after_the_scale_out() -> None:
    catalog = load_catalog(("short", "medium", "long", "xlong"))
    workers = {"short": 1, "medium": 2, "long": 4, "xlong": 1}
    planned = bucket_partitions(parse_args(["--out", "x"]), catalog, workers, scaled="long")
    assert planned == {
        "audio.bucket.short": 6,
        "audio.bucket.medium": 6,
        "audio.bucket.long": 20,
        "audio.bucket.xlong": 6,
    }
    as_is = bucket_partitions(parse_args(["--out", "x", "--partitions", "catalog"]), catalog, workers, scaled="long")
    assert set(as_is.values()) == {6}  # 4 workers over 6 partitions: the skew the plan warns of


def test_routers_option_overrides_the_plan() -> None:
    planned, count = router_plan(parse_args(["--calls", "100000", "--out", "x", "--routers", "2"]), 6)
    assert planned.routers == 11 and count == 2


def test_the_ideal_makespan_packs_a_buckets_calls_into_full_batches() -> None:
    # a worker batches many calls together: the ideal is their device time in full batches, not the
    # sum of each call alone (every lone call would pay the batch-fill floor)
    opts = SimulatedEngineOptions(rtfx=450.0)
    calls = [SimulatedRecording(i, 300.0, 2, 8000, None) for i in range(100)]
    together = device_time([(r.duration_s, r.channels) for r in calls], opts).device_s
    alone = sum(device_time([(r.duration_s, r.channels)], opts).device_s for r in calls)
    assert together < 0.8 * alone
    buckets = Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong"))
    assert ideal_device_s(calls, buckets, {"long": 2}, opts) == pytest.approx(together / 2)


def test_the_nights_plan_predicts_the_ideal_device_time() -> None:
    # one model: the plan's finish for the night's own calls is the engine's device time of each
    # bucket in full batches (window round-up included), not audio / RTFx
    opts = parse_args(["--calls", "300", "--out", "x"])
    engine = SimulatedEngineOptions(rtfx=opts.rtfx)
    good = [r for r in generate(300, opts.seed, opts.stereo_share, opts.bad_share) if r.fault is None]
    buckets = Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong"))
    audio: dict[str, float] = {}
    for r in good:
        audio[buckets.bucket_for(r.duration_s)] = audio.get(buckets.bucket_for(r.duration_s), 0.0) + r.duration_s
    planned = night_plan(opts, audio, buckets.names, cost_factors(good, buckets, engine))
    workers = {b.bucket: max(1, b.workers) for b in planned.buckets}
    assert planned.busy_s == pytest.approx(ideal_device_s(good, buckets, workers, engine), rel=2e-3)
    assert planned.busy_s > 1.05 * max(audio.values()) / opts.rtfx


def test_a_stamp_that_does_not_continue_its_lanes_totals_is_a_break() -> None:
    from pipeline.headers import PartitionProgress, Stamp
    from tools.simulate_night import stamp_breaks

    class Routed:  # what the night reads back: a record's topic, partition and headers
        def __init__(self, partition: int, stamp: Stamp | None) -> None:
            self._partition, self._headers = partition, stamp.to_headers() if stamp else []

        def topic(self) -> str:
            return "audio.bucket.long"

        def partition(self) -> int:
            return self._partition

        def headers(self) -> list:
            return self._headers

    lanes = {0: PartitionProgress(), 1: PartitionProgress()}  # two routers, one lane each
    whole = [
        Routed(p, lanes[lane].stamp("audio.bucket.long", p, 10.0 + i, lane))
        for i, (p, lane) in enumerate([(0, 0), (0, 1), (1, 0), (0, 0), (0, 1), (1, 1)])
    ]
    assert stamp_breaks(whole) == 0
    restarted = PartitionProgress()  # a router that took lane 0 over without its totals
    assert stamp_breaks([*whole, Routed(0, restarted.stamp("audio.bucket.long", 0, 5.0, 0))]) == 1
    assert stamp_breaks([*whole, Routed(0, None)]) == 1  # unstamped
    per_router = PartitionProgress()  # the stamps before lanes: both routers' totals in one series
    interleaved = [Routed(0, per_router.stamp("audio.bucket.long", 0, 1.0)) for _ in range(3)]
    other = PartitionProgress()
    interleaved.insert(2, Routed(0, other.stamp("audio.bucket.long", 0, 1.0)))  # 1, 2, 1, 3
    assert stamp_breaks(interleaved) == 2
