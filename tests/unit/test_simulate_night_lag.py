"""tools/night_lag reads `callqa lag --json` by the lag view's own fields and scores its ETA."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pipeline.ops.lag import GroupSummary, RateTracker, Verdict
from pipeline.ops.lag_view import as_json
from tools.night_lag import LagSample, eta_errors, eta_summary, parse_lag

NOW = datetime(2026, 12, 3, 2, 0, 0, 250000, tzinfo=UTC)


def _lag_json(*summaries: GroupSummary) -> dict:
    data = as_json([], list(summaries), RateTracker(), NOW, None, 0.1)
    return json.loads(json.dumps(data))  # as the tool reads it: the command's stdout


def _summary(stage: str, eta_s: float | None, audio_s: float | None = 600.0, messages: int = 10) -> GroupSummary:
    return GroupSummary(stage, stage, messages, audio_s, 2.0, "audio s/s", Verdict("no window", eta_s, None))


def test_a_sample_takes_the_slowest_asr_eta_and_each_buckets_backlog() -> None:
    data = _lag_json(
        _summary("router", 900.0, None, messages=42),
        _summary("asr-short", 120.0, 300.0),
        _summary("asr-long", 480.0, 7200.0),
        _summary("qa", 999.0, None),
    )
    sample = parse_lag(data, published_at=NOW.timestamp() - 30.0, share_done=0.25)
    assert sample.at_s == 30.0  # the lag's own reading time (ms), not when the tool saw the output
    assert sample.eta_s == 480.0
    assert sample.backlog_audio_s == {"short": 300.0, "long": 7200.0}
    assert sample.router_behind == 42


def test_no_asr_eta_yet_is_none() -> None:
    assert parse_lag(_lag_json(_summary("asr-short", None), _summary("qa", 30.0)), NOW.timestamp(), 0.0).eta_s is None
    assert parse_lag(_lag_json(), NOW.timestamp(), 0.0).eta_s is None


def _sample(at_s: float, share: float, eta_s: float | None) -> LagSample:
    return LagSample(at_s, share, eta_s, {}, None)


def test_eta_errors_count_from_a_tenth_of_the_night_against_the_actual_finish() -> None:
    samples = [_sample(5, 0.05, 10.0), _sample(20, 0.2, 90.0), _sample(50, 0.5, 45.0), _sample(60, 0.6, None)]
    assert eta_errors(samples, finish_s=100.0) == [(0.2, 0.1), (0.5, -0.05)]
    summary = eta_summary(samples, finish_s=100.0)
    assert summary == {"worst": 0.1, "median_abs": 0.075, "first": 0.1, "samples": 2}


def test_no_samples_after_a_tenth_gives_no_error() -> None:
    assert eta_summary([_sample(5, 0.05, 10.0)], finish_s=100.0)["worst"] is None


def test_the_eta_once_the_workers_stopped_changing_is_scored_apart() -> None:
    # a worker added at 40 s: the samples before (and just after) it are scored in the night's figures,
    # the settled figures count only from the given time on
    samples = [_sample(20, 0.2, 120.0), _sample(50, 0.5, 52.0), _sample(60, 0.6, 39.0)]
    summary = eta_summary(samples, finish_s=100.0, settled_from_s=46.0)
    assert summary["worst"] == 0.4 and summary["samples"] == 3
    assert summary["settled_from_s"] == 46.0
    assert summary["settled"] == {"worst": 0.02, "median_abs": 0.015, "first": 0.02, "samples": 2}
