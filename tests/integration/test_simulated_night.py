"""A small simulated night through the real stages: router, W workers per bucket, QA, a SIGKILL and a
scale-out; duplicates and losses counted from the real output topics (tools/simulate_night.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.config import Settings
from tools.simulate_night import parse_args, run

REQUIRED = [
    "calls",
    "routed",
    "transcribed",
    "qa_results",
    "dead_lettered",
    "duplicates",
    "lost",
    "router_arrivals_per_s",
    "makespan_s",
    "ideal_makespan_s",
    "makespan_ratio",
    "worker_skew",
    "eta_error_after_10pct",
    "rebalance_max_s",
    "peak_rss_mb",
    "options",
]


def test_a_small_night_loses_nothing_and_duplicates_nothing(isolated_settings: Settings, tmp_path: Path) -> None:
    opts = parse_args(
        [
            "--calls",
            "150",
            "--out",
            str(tmp_path),
            "--workers",
            "short=1,medium=2,long=2,xlong=1",
            "--target-wall-s",
            "40",
            "--bad-share",
            "0.03",
            "--timeout-s",
            "240",
        ]
    )
    result = run(isolated_settings.model_copy(update={"arrivals_topic": None}), opts)  # a private arrivals topic
    night = json.loads((tmp_path / "night.json").read_text())
    assert [k for k in REQUIRED if k not in night] == []
    assert (tmp_path / "night.html").read_text().count("<svg") >= 3
    assert night["duplicates"] == 0 and night["lost"] == 0, night["lost_sample"]
    assert night["transcribed"] + night["dead_lettered"] == night["calls"] == 150
    assert night["dead_lettered"] >= night["planted_bad_inputs"] > 0  # every bad input reached a DLQ
    assert night["qa_results"] == night["transcribed"]
    assert [e["what"].split()[0] for e in night["events"]] == ["SIGKILL", "restart", "scale"]
    assert result["peak_rss_mb"]["router"] > 0 and result["peak_rss_mb"]["worker"] > 0
    # the plan's finish pays the engine's batching costs (window round-up), past audio / RTFx
    assert night["plan"]["busy_s"] > night["plan"]["busy_s_audio_only"] and night["plan"]["cost_factors"]["long"] > 1


def test_routers_joining_one_after_another_over_a_burst_route_and_dead_letter_each_arrival_once(
    isolated_settings: Settings, tmp_path: Path
) -> None:
    """Three routers start together over a burst with many bad inputs: while the group forms, the
    first router's partitions are revoked and given back or moved. Before its open transactions were
    aborted at the revoke, a 2,000-call night routed 256-534 calls twice and dead-lettered 69-143
    arrivals twice (a kept partition was rewound and processed again into the same transaction)."""
    opts = parse_args(
        [
            "--calls", "1500",
            "--out", str(tmp_path),
            "--routers", "3",
            "--workers", "short=1,medium=1,long=1,xlong=1",
            "--bad-share", "0.2",
            "--kill-at", "0",
            "--scale-out-at", "0",
            "--target-wall-s", "30",
            "--timeout-s", "300",
        ]
    )  # fmt: skip
    run(isolated_settings.model_copy(update={"arrivals_topic": None}), opts)
    night = json.loads((tmp_path / "night.json").read_text())
    assert night["router_processes"] == 3
    assert night["duplicates_by_output"] == {"routed": 0, "transcripts": 0, "qa_results": 0, "dead_letters": 0}
    assert night["lost"] == 0, night["lost_sample"]
    assert night["dead_lettered"] == night["planted_bad_inputs"] == night["dead_lettered_by_topic"]["router.dlq"]
    assert night["stamp_breaks"] == 0  # each lane's totals continue across the routers taking it over
