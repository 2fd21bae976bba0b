"""tools/simulate_night reads `callqa lag --json` by the lag view's own fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pipeline.ops.lag import GroupSummary, RateTracker, Verdict
from pipeline.ops.lag_view import as_json
from tools.simulate_night import slowest_asr_eta


def _lag_json(*summaries: GroupSummary) -> dict:
    data = as_json([], list(summaries), RateTracker(), datetime(2026, 12, 3, 2, 0, tzinfo=UTC), None, 0.1)
    return json.loads(json.dumps(data))  # as the tool reads it: the command's stdout


def _summary(stage: str, eta_s: float | None) -> GroupSummary:
    return GroupSummary(stage, stage, 10, 600.0, 2.0, "audio s/s", Verdict("no window", eta_s, None))


def test_the_slowest_asr_groups_eta_is_taken() -> None:
    data = _lag_json(_summary("router", 900.0), _summary("asr-short", 120.0), _summary("asr-long", 480.0),
                     _summary("qa", 999.0))
    assert slowest_asr_eta(data) == 480.0


def test_no_asr_eta_yet_is_none() -> None:
    assert slowest_asr_eta(_lag_json(_summary("asr-short", None), _summary("qa", 30.0))) is None
    assert slowest_asr_eta(_lag_json()) is None
