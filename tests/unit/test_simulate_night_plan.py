"""tools/simulate_night takes its router processes from `callqa plan` unless --routers overrides it."""

from __future__ import annotations

from tools.simulate_night import parse_args, router_plan


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
