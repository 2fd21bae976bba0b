"""tools/simulate_night takes its router processes from `callqa plan` unless --routers overrides it."""

from __future__ import annotations

import pytest

from pipeline.simulated.engine import SimulatedEngineOptions, device_time
from pipeline.simulated.storage import SimulatedRecording
from pipeline.stages.routing import Buckets
from tools.simulate_night import ideal_device_s, parse_args, router_plan


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
