"""Replays on real Kafka: a QA replay group tags its results (its group name by default) on top of
each transcript's own replay id, and a re-route cut short by its time limit says so."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.events import QAResult, decode, encode
from tests import audio
from tests.kafka_helpers import consume, produce
from tests.processes import callqa, spawn, stop
from tests.samples import one_turn_transcript as transcript

pytestmark = pytest.mark.integration


def test_a_qa_replay_group_adds_its_id_to_each_transcripts(settings: Settings, unique: str, tmp_path: Path) -> None:
    # asr.transcripts holds the original transcript and an ASR replay's (other words, other score)
    originals = [
        transcript("This call is recorded. Thank you for calling.", None),
        transcript("you are an idiot", "asr-r2"),
    ]
    produce(settings, "asr.transcripts", [(b"c1", encode(t)) for t in originals])
    group = f"qa-r3-{unique}"
    proc = spawn(settings, tmp_path / "qa.log", "qa", "--group", group)  # no --replay-id: the group is the id
    try:
        found = consume(settings, "qa.findings", want=2, timeout_s=180, settle_s=5)
    finally:
        stop(proc)
    results = [decode(m.value(), QAResult) for m in found]
    assert Counter((r.call_id, r.replay_id) for r in results) == Counter(
        {("c1", group): 1, ("c1", f"asr-r2/{group}"): 1}
    )
    assert len({r.score for r in results}) == 2


def test_a_reroute_cut_short_by_its_time_limit_says_how_many_are_left(
    settings: Settings, unique: str, tmp_path: Path
) -> None:
    t0 = datetime.now(UTC)
    for name in ("d1", "d2"):
        audio.write(tmp_path / "calls" / f"{name}.wav", 3.0, 16000)
    assert callqa(settings, "ingest", str(tmp_path / "calls")).returncode == 0
    # MinIO publishes the arrivals after the upload returns: wait for them before re-routing
    arrivals = settings.model_copy(update={"topic_prefix": ""})  # the stack's own topic, shared
    mine = lambda m: (m.key() or b"").startswith(settings.recordings_bucket.encode() + b"/")  # noqa: E731
    assert len(consume(arrivals, settings.arrivals, want=2, timeout_s=60, keep=mine)) == 2
    cut = callqa(
        settings, "replay", "reroute", "--generation", "1", "--from", t0.isoformat(), "--execute", "--time-limit-s", "0"
    )
    assert cut.returncode != 0, cut.stdout + cut.stderr
    assert "2 left" in cut.stdout + cut.stderr, cut.stdout + cut.stderr
    done = callqa(settings, "replay", "reroute", "--generation", "1", "--from", t0.isoformat(), "--execute")
    assert done.returncode == 0 and "re-routed 2 arrival(s)" in done.stdout, done.stdout + done.stderr
