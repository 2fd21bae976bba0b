"""Foundation against the real servers: topic catalog, event round trips, MinIO's own arrivals, the stack."""

from __future__ import annotations

import io
import subprocess
import sys
import wave

import pytest
from confluent_kafka.admin import AdminClient

from pipeline import stack
from pipeline.adapters.kafka_admin import apply_catalog, describe
from pipeline.adapters.minio_store import storage_client
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import EVENT_TYPES, AudioArrived, decode, decode_arrival, encode
from pipeline.stack.minio import prepare_bucket
from pipeline.stack.processes import alive, port_open
from tests.kafka_helpers import consume, produce
from tests.samples import sample_events

pytestmark = pytest.mark.integration


def test_topics_apply_is_idempotent_and_describe_matches(isolated_settings: Settings) -> None:
    specs = load_catalog(isolated_settings.bucket_names)
    first = apply_catalog(isolated_settings, specs)
    assert {c.action for c in first} == {"create"}
    # arrivals, 4 buckets, transcripts (+ raw), findings, audio.redacted, router.seen, 4 DLQs, 3 retry topics,
    # dlq.parked, dlq.handled
    assert len(first) == len(specs) == 19
    assert apply_catalog(isolated_settings, specs) == []
    rows = describe(isolated_settings, specs)
    assert all(row["in_sync"] for row in rows), rows
    assert rows[0]["live"]["partitions"] == specs[0].partitions


def test_topics_apply_reports_and_fixes_drift(isolated_settings: Settings) -> None:
    specs = load_catalog(isolated_settings.bucket_names)
    apply_catalog(isolated_settings, specs)
    wider = [s if s.name != "asr.transcripts" else
             type(s)(**{**s.__dict__, "partitions": s.partitions + 2, "config": {**s.config, "retention.ms": "1000"}})
             for s in specs]
    changes = {(c.topic.removeprefix(isolated_settings.topic_prefix), c.action) for c in apply_catalog(isolated_settings, wider)}
    assert changes == {("asr.transcripts", "add_partitions"), ("asr.transcripts", "alter_config")}
    assert apply_catalog(isolated_settings, wider) == []


def test_topics_apply_exits_non_zero_when_drift_cannot_be_applied(isolated_settings: Settings) -> None:
    from tests.processes import callqa

    specs = load_catalog(isolated_settings.bucket_names)
    wider = [s if s.name != "router.dlq" else type(s)(**{**s.__dict__, "partitions": s.partitions + 1}) for s in specs]
    apply_catalog(isolated_settings, wider)  # the live topic has more partitions than the catalog says
    dry = callqa(isolated_settings, "topics", "apply")  # a dry run reports it and exits 0
    assert dry.returncode == 0 and "router.dlq: partitions" in dry.stdout and "manual step" in dry.stdout, dry.stdout
    result = callqa(isolated_settings, "topics", "apply", "--execute")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "router.dlq: partitions" in result.stdout and "NOT APPLIED" in result.stdout


def test_every_event_round_trips_through_the_broker(isolated_settings: Settings) -> None:
    apply_catalog(isolated_settings, load_catalog(isolated_settings.bucket_names))
    events = sample_events()
    produce(isolated_settings, "asr.transcripts", [(b"k", encode(e)) for e in events])
    received = consume(isolated_settings, "asr.transcripts", want=len(events), timeout_s=30)
    assert len(received) == len(events)
    by_type = {type(e): e for e in events}
    for msg, event in zip(sorted(received, key=lambda m: m.offset()), events):
        assert decode(msg.value(), type(event)) == by_type[type(event)]
    assert set(map(type, events)) == set(EVENT_TYPES.values())


def _wav_bytes(seconds: float = 0.5, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(seconds * rate))
    return buf.getvalue()


def test_minio_put_emits_its_own_arrival_event(stack_settings: Settings, unique: str) -> None:
    settings = stack_settings.model_copy(update={"recordings_bucket": f"rec-{unique}"})
    client = storage_client(settings)
    prepare_bucket(client, settings.recordings_bucket)
    key = f"2026/11/30/call {unique}+1.wav"
    data = _wav_bytes()
    result = client.put_object(settings.recordings_bucket, key, io.BytesIO(data), len(data),
                               content_type="audio/wav", metadata={"call-id": unique})
    wanted = f"{settings.recordings_bucket}/{key}".encode()
    messages = consume(settings, "audio.arrivals", want=1, timeout_s=30, keep=lambda m: m.key() == wanted)
    assert len(messages) == 1, "MinIO did not publish the arrival"
    arrival = decode_arrival(messages[0].value())
    assert isinstance(arrival, AudioArrived) and arrival.source == "minio"
    assert arrival.object.bucket == settings.recordings_bucket
    assert arrival.object.key == key
    assert arrival.object.size_bytes == len(data)
    assert arrival.object.etag == result.etag
    assert arrival.object.version_id == result.version_id
    assert arrival.metadata["call-id"] == unique


def test_stack_starts_from_nothing_and_stops_cleanly(tmp_path) -> None:
    settings = Settings(state_dir=tmp_path / "own-stack")
    assert stack.status(settings)["running"] is False
    state = stack.up(settings)
    info = stack.status(settings)
    assert info["running"] and info["kafka"]["up"] and info["minio"]["up"]
    assert AdminClient({"bootstrap.servers": info["kafka"]["bootstrap"]}).list_topics(timeout=10).brokers
    # The CLI sees the same stack through the connection file.
    cli = subprocess.run([sys.executable, "-m", "pipeline.cli", "--state-dir", str(settings.state_dir),
                          "stack", "status"], capture_output=True, text=True)
    assert cli.returncode == 0 and str(state.kafka_port) in cli.stdout
    assert sorted(stack.down(settings)) == ["kafka", "minio"]
    assert not alive(state.kafka_pid) and not alive(state.minio_pid)
    assert not port_open(state.kafka_port) and not port_open(state.minio_port)
    assert stack.status(settings)["running"] is False
    assert stack.down(settings) == []
