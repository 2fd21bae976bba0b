"""Dead letters on the real stack (issue 26 items 1, 3, 4): a redrive keeps the headers that decide
processing, a letter always fits its topic, and a redrive goes back to the group that failed it
instead of writing a shared topic a second time."""

from __future__ import annotations

import io
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.minio_store import storage_client
from pipeline.adapters.publisher import ArrivalPublisher
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import (
    DeadLetter,
    ModelInfo,
    ObjectRef,
    QAResult,
    RoutedCall,
    Segment,
    SourcePosition,
    Transcript,
    decode,
    encode,
)
from pipeline.runtime.kafka_retry import end_offset
from pipeline.stack.minio import prepare_bucket
from tests import audio
from tests.kafka_helpers import consume, produce
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(stack_settings: Settings, unique: str) -> Settings:
    """Private bucket and topics; arrivals are published by hand (as in test_ops_dlq)."""
    cfg = stack_settings.model_copy(update={"recordings_bucket": f"rec-{unique}", "topic_prefix": f"t{unique}."})
    prepare_bucket(storage_client(cfg), cfg.recordings_bucket)
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    return cfg


def dlq_letters(settings: Settings, topic: str, want: int, timeout_s: float = 120) -> list:
    return consume(settings, topic, want=want, timeout_s=timeout_s, settle_s=3)


def test_an_arrival_whose_letter_is_too_large_still_ends_in_router_dlq_fitting(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    """64,000 non-string metadata values: a validation error of megabytes, in an arrival under 1 MB."""
    metadata = {str(i): i for i in range(64_000)}
    event = {"schema_version": "1.1", "type": "audio.arrived", "source": "upstream", "metadata": metadata,
             "object": {"bucket": settings.recordings_bucket, "key": "huge-metadata.wav"}}
    payload = orjson.dumps(event)
    assert len(payload) < 1_000_000
    key = f"{settings.recordings_bucket}/huge-metadata.wav".encode()
    produce(settings, "audio.arrivals", [(key, payload)])
    router = spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}")
    try:
        found = dlq_letters(settings, "router.dlq", 1, timeout_s=120)
    finally:
        stop(router)
    assert len(found) == 1, (tmp_path / "router.log").read_text()[-3000:]
    raw = found[0].value()
    limit = next(int(s.config["max.message.bytes"]) for s in load_catalog(settings.bucket_names)
                 if s.name == "router.dlq")
    assert len(raw) + len(found[0].key() or b"") <= limit
    letter = decode(raw, DeadLetter)
    assert letter.reason == "malformed_event" and letter.stage == "router"
    assert letter.source == SourcePosition(topic=settings.arrivals, partition=letter.source.partition, offset=0)
    assert letter.original_key == key.decode()
    data = json.loads(raw)
    assert data["truncated"] is True and data["original_payload_bytes"] == len(payload)
    assert payload.startswith(letter.original_payload)


def test_a_redriven_replay_letter_keeps_its_generation_and_is_routed(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    """reroute --generation 2 -> storage out -> fetch_failed -> redrive: routed as gen2, not skipped."""
    data = audio.write(tmp_path / "call.wav", 3.0, 8000).read_bytes()
    storage_client(settings).put_object(settings.recordings_bucket, "call.wav", io.BytesIO(data), len(data))
    t0 = datetime.now(UTC)
    publisher = ArrivalPublisher(settings)
    publisher.publish(ObjectRef(bucket=settings.recordings_bucket, key="call.wav"))
    publisher.flush()
    app = ("router", "--app-id", f"router-{unique}")
    router = spawn(settings, tmp_path / "router-1.log", *app)
    try:
        assert [c.replay_id for c in routed(settings, 1, settle_s=0)] == [None]
    finally:
        stop(router)
    result = callqa(settings, "replay", "reroute", "--generation", "2", "--from", t0.isoformat(), "--execute")
    assert result.returncode == 0, result.stderr
    # The storage is out for this router: its probe gives up after 2 s (fetch_failed).
    router = spawn(settings, tmp_path / "router-2.log", *app, s3_endpoint="127.0.0.1:9",
                   storage_retry_deadline_s="2")
    try:
        letters = dlq_letters(settings, "router.dlq", 1)
    finally:
        stop(router)
    assert [decode(m.value(), DeadLetter).reason for m in letters] == ["fetch_failed"]
    router = spawn(settings, tmp_path / "router-3.log", *app)
    try:
        result = callqa(settings, "dlq", "redrive", "--reason", "fetch_failed", "--execute")
        assert result.returncode == 0, result.stderr
        assert "redriven 1" in result.stdout, result.stdout
        calls = routed(settings, 2, settle_s=8)
    finally:
        stop(router)
    assert sorted(str(c.replay_id) for c in calls) == ["None", "gen2"], (tmp_path / "router-3.log").read_text()[-3000:]


def routed(settings: Settings, want: int, settle_s: float) -> list[RoutedCall]:
    msgs = consume(settings, "audio.bucket.short", want=want, timeout_s=120, settle_s=settle_s)
    return [decode(m.value(), RoutedCall) for m in msgs]


def transcript(call_id: str) -> Transcript:
    return Transcript(
        call_id=call_id, object=ObjectRef(bucket="recordings", key=f"{call_id}.wav"), agent_id="a-3",
        duration_s=20.0, channels=2, languages={"0": "en", "1": "en"}, model=ModelInfo(name="whisper-base", version="t"),
        segments=[Segment(role="agent", channel=0, start_s=0.5, end_s=6.0, text="This call is recorded."),
                  Segment(role="customer", channel=1, start_s=7.0, end_s=12.0, text="I want my balance.")])


def move_group_to_end(settings: Settings, group: str, topic: str) -> None:
    """The group has read the topic to its end (the failed transcript is behind it)."""
    consumer = Consumer({**settings.kafka_common(), "group.id": group, "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = [TopicPartition(topic, p, end_offset(consumer, topic, p)) for p in parts]
        consumer.commit(offsets=ends, asynchronous=False)
    finally:
        consumer.close()


def test_a_redriven_qa_letter_gives_one_result_and_no_second_transcript(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    """A letter QA wrote for a transcript (e.g. a rule-engine bug) is redriven once the stage is fixed."""
    t = transcript(f"call-{unique}")
    produce(settings, "asr.transcripts", [(t.call_id.encode(), encode(t))])
    source = consume(settings, "asr.transcripts", want=1, timeout_s=30)[0]
    letter = DeadLetter.of(payload=source.value(), key=source.key(), reason="internal_error", stage="qa",
                           message="RuntimeError: a bug", source=SourcePosition(
                               topic=source.topic(), partition=source.partition(), offset=source.offset()))
    produce(settings, "qa.dlq", [(source.key(), encode(letter))])
    group = "callqa-qa"  # the QA stage's default app id: the group a letter of 1.1 (no group field) came from
    move_group_to_end(settings, group, settings.topic("asr.transcripts"))
    qa = spawn(settings, tmp_path / "qa.log", "qa")
    try:
        time.sleep(5)
        result = callqa(settings, "dlq", "redrive", "--stage", "qa", "--reason", "internal_error", "--execute")
        assert result.returncode == 0, result.stderr
        assert "redriven 1" in result.stdout, result.stdout
        results = consume(settings, "qa.findings", want=1, timeout_s=120, settle_s=8)
    finally:
        stop(qa)
    assert [decode(m.value(), QAResult).call_id for m in results] == [t.call_id], (tmp_path / "qa.log").read_text()[-3000:]
    plain = Consumer({**settings.kafka_common(), "group.id": f"downstream-{uuid.uuid4().hex[:6]}",
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    plain.subscribe([settings.topic("asr.transcripts")])
    copies, deadline = [], time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            msg = plain.poll(0.5)
            if msg is not None and not msg.error():
                copies.append(msg.key())
    finally:
        plain.close()
    assert copies == [t.call_id.encode()]
