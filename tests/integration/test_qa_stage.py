"""The Faust QA stage on the real broker: findings once per call, malformed input to qa.dlq, bad packs refused."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import DeadLetter, ModelInfo, ObjectRef, QAResult, Segment, Transcript, decode, encode
from tests.kafka_helpers import TopicReader, produce
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration


def transcript(call_id: str, agent_text: str, customer_text: str) -> Transcript:
    return Transcript(
        call_id=call_id, object=ObjectRef(bucket="recordings", key=f"{call_id}.wav"), agent_id="a-3",
        duration_s=20.0, channels=2, languages={"0": "en", "1": "en"}, model=ModelInfo(name="whisper-base", version="t"),
        segments=[Segment(role="agent", channel=0, start_s=0.5, end_s=6.0, text=agent_text),
                  Segment(role="customer", channel=1, start_s=7.0, end_s=12.0, text=customer_text)])


def run_qa(settings: Settings, unique: str, tmp_path: Path, want: int) -> tuple[list[QAResult], list[DeadLetter]]:
    """Run a QA stage until ``want`` outputs (findings and letters) have come and 5 s passed with no more."""
    reader = TopicReader(settings, ["qa.findings", "qa.dlq"])
    proc = spawn(settings, tmp_path / "qa.log", "qa", "--app-id", f"qa-{unique}")
    try:
        reader.wait_for(lambda msgs: len(msgs), want, timeout_s=120, settle_s=5)
    finally:
        stop(proc)
    results = [decode(m.value(), QAResult) for m in reader.messages if m.topic().endswith("qa.findings")]
    letters = [decode(m.value(), DeadLetter) for m in reader.messages if m.topic().endswith("qa.dlq")]
    return results, letters


def test_findings_once_per_call_and_malformed_to_dlq(isolated_settings: Settings, unique: str, tmp_path: Path) -> None:
    settings = isolated_settings
    apply_catalog(settings, load_catalog(settings.bucket_names))
    calls = [
        transcript(f"c{i}", "Hello, my name is Anna. This call is recorded for quality purposes. Have a nice day.",
                   "My card number is 4532 0151 1283 0366." if i == 0 else "I want to check my balance.")
        for i in range(12)
    ]
    produce(settings, "asr.transcripts",
            [(t.call_id.encode(), encode(t)) for t in calls] + [(b"bad", b'{"schema_version": "1.0", "call_id": 5}')])
    results, letters = run_qa(settings, unique, tmp_path, want=13)
    assert Counter(r.call_id for r in results) == Counter(t.call_id for t in calls)
    leaked = next(r for r in results if r.call_id == "c0")
    assert [p.type for p in leaked.pii] == ["bank_card"]
    assert "4532" not in json.dumps([s.text for s in leaked.redacted_segments])
    assert all(r.score == 100 for r in results if r.call_id != "c0"), [(r.call_id, r.findings) for r in results]
    assert [(d.reason, d.stage, d.original_key) for d in letters] == [("malformed_transcript", "qa", "bad")]


def test_a_bad_rule_pack_is_refused_at_start(isolated_settings: Settings, tmp_path: Path) -> None:
    pack = tmp_path / "ops.yaml"
    pack.write_text("pack: ops\nrules:\n  - id: late.notice\n    kind: required_disclosure\n    severity: high\n"
                    "    phrases: [this call is recorded]\n    within_first_s: -5\n")
    result = callqa(isolated_settings, "qa", qa_rule_packs=json.dumps([str(pack)]))
    assert result.returncode != 0
    assert "late.notice" in result.stderr and "within_first_s" in result.stderr


def test_a_transcript_over_one_megabyte_is_evaluated(isolated_settings: Settings, unique: str, tmp_path: Path) -> None:
    """1.2 MB of text (an hour of fast talk): the QAResult carries it redacted, over aiokafka's 1 MB default."""
    from confluent_kafka import Producer

    settings = isolated_settings
    apply_catalog(settings, load_catalog(settings.bucket_names))
    long_text = "please hold while I check your account " * 31_000
    calls = [transcript("long", "This call is recorded for quality purposes. " + long_text, "fine"),
             transcript("after", "This call is recorded for quality purposes.", "thanks")]
    producer = Producer({**settings.kafka_common(), "message.max.bytes": 8 * 2**20})
    for t in calls:
        producer.produce(settings.topic("asr.transcripts"), key=t.call_id.encode(), value=encode(t))
    assert producer.flush(30) == 0
    assert len(encode(calls[0])) > 1_200_000
    results, letters = run_qa(settings, unique, tmp_path, want=2)
    assert sorted(r.call_id for r in results) == ["after", "long"], (tmp_path / "qa.log").read_text()[-3000:]
    assert not letters


def test_a_stage_killed_mid_stream_again_and_again_publishes_each_result_once(
    isolated_settings: Settings, unique: str, tmp_path: Path
) -> None:
    """SIGKILL three times while results are in flight, then a last run: every transcript has its
    QA result exactly once. One transcript per batch (qa_batch_max=1) keeps a delivery in flight
    most of the time, so a commit often starts while one is; before the commit gate
    (faust_app.GatedConsumer) such a commit published the output without its input's offset."""
    settings = isolated_settings
    apply_catalog(settings, load_catalog(settings.bucket_names))
    n = 2000
    calls = [transcript(f"c{i:04d}", "Hello, my name is Anna. This call is recorded for quality purposes.",
                        "I want to check my balance.") for i in range(n)]
    produce(settings, "asr.transcripts", [(t.call_id.encode(), encode(t)) for t in calls])
    reader = TopicReader(settings, ["qa.findings", "qa.dlq"])
    log = tmp_path / "qa.log"

    def results() -> list[str]:
        return [decode(m.value(), QAResult).call_id for m in reader.messages if m.topic().endswith("qa.findings")]

    for kill_at in (200, 600, 1000):
        proc = spawn(settings, log, "qa", "--app-id", f"qa-{unique}", qa_batch_max="1")
        try:
            reader.wait_for(lambda _: len(results()), kill_at, timeout_s=240, settle_s=0)
            assert len(set(results())) < n, "the stage finished before it was killed"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            stop(proc)
    last = spawn(settings, log, "qa", "--app-id", f"qa-{unique}", qa_batch_max="1")
    try:
        reader.wait_for(lambda _: len(set(results())), n, timeout_s=300, settle_s=5)
    finally:
        stop(last)
    counts = Counter(results())
    assert len(counts) == n, log.read_text()[-3000:]
    assert {k: v for k, v in counts.items() if v > 1} == {}, "published more than once"
