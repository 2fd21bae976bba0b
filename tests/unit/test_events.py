"""Event contracts: round trips, schema agreement, typed decode errors."""

from __future__ import annotations

import jsonschema
import orjson
import pytest

from pipeline.catalog import generated_schema, load_schema
from pipeline.errors import DecodeError, SkipEvent
from pipeline.events import (
    EVENT_TYPES,
    AudioArrived,
    Transcript,
    UnsupportedSchemaVersion,
    decode,
    decode_arrival,
    encode,
)
from tests.samples import MINIO_EVENT, sample_events


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_committed_schema_is_the_generated_one(event_type: str) -> None:
    assert load_schema(event_type) == generated_schema(event_type), "run: callqa topics schemas --write"


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_round_trip_and_schema(event) -> None:
    payload = encode(event)
    assert decode(payload, type(event)) == event
    jsonschema.validate(orjson.loads(payload), load_schema(_type_name(event)))


def _type_name(event) -> str:
    return next(name for name, cls in EVENT_TYPES.items() if isinstance(event, cls))


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"object": {"bucket": "b", "key": "k"}}', "schema_version"),
        (b'{"schema_version": "1.0", "object": {"bucket": "b"}}', "object.key"),
        (b'{"schema_version": "1.0", "object": {"bucket": "b", "key": "k", "size_bytes": -1}}', "size_bytes"),
    ],
)
def test_malformed_arrival_raises_typed_error(payload: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode(payload, AudioArrived)


def test_a_newer_minor_version_with_extra_fields_is_read() -> None:
    """Within a major version readers ignore fields they do not know, at any depth (topics/README.md)."""
    original = sample_events()[2]  # a Transcript
    event = orjson.loads(encode(original))
    event.update(schema_version="1.1", sentiment={"score": 0.2})
    event["object"]["storage_class"] = "GLACIER"
    event["segments"][0]["confidence"] = 0.93
    t = decode(orjson.dumps(event), Transcript)
    assert encode(t) == encode(original.model_copy(update={"schema_version": "1.1"}))


def test_writers_stay_strict_about_unknown_fields() -> None:
    payload = b'{"schema_version": "1.0", "object": {"bucket": "b", "key": "k"}, "surprise": 1}'
    with pytest.raises(DecodeError, match="surprise"):
        decode(payload, AudioArrived, strict=True)  # how tests check what a writer produced
    with pytest.raises(ValueError, match="surprise"):
        AudioArrived(object={"bucket": "b", "key": "k"}, surprise=1)


@pytest.mark.parametrize("payload", [b'{"object": {"bucket": "b", "key": "k"}}',
                                     b'{"schema_version": 1, "object": {"bucket": "b", "key": "k"}}'])
def test_a_missing_schema_version_is_malformed_not_unsupported(payload: bytes) -> None:
    from pipeline.stages.router import ArrivalRouter, Dead
    from pipeline.stages.routing import Buckets

    with pytest.raises(DecodeError) as err:
        decode(payload, AudioArrived)
    assert not isinstance(err.value, UnsupportedSchemaVersion)
    router = ArrivalRouter(store=None, buckets=Buckets((30.0,), ("a", "b")), partitions_of=lambda b: 1,  # type: ignore[arg-type]
                           max_duration_s=60)
    out = router.route(payload, b"k", {})
    assert isinstance(out, Dead) and out.letter.reason == "malformed_event"
    out = router.route(b'{"schema_version": "2.0", "object": {"bucket": "b", "key": "k"}}', b"k", {})
    assert isinstance(out, Dead) and out.letter.reason == "unsupported_schema"


def test_unknown_major_version_is_rejected() -> None:
    with pytest.raises(UnsupportedSchemaVersion):
        decode(b'{"schema_version": "2.0", "object": {"bucket": "b", "key": "k"}}', AudioArrived)


def test_minio_event_is_unescaped_with_metadata() -> None:
    arrival = decode_arrival(orjson.dumps(MINIO_EVENT))
    assert arrival.source == "minio"
    assert arrival.object.key == "dir/a b+c.wav"
    assert arrival.object.version_id == "v1"
    assert arrival.object.size_bytes == 8
    assert arrival.metadata == {"call-id": "x1", "roles": "0=agent"}
    assert arrival.content_type == "audio/wav"


def test_minio_deletion_is_skipped_not_dead_lettered() -> None:
    deletion = {**MINIO_EVENT, "EventName": "s3:ObjectRemoved:Delete",
                "Records": [{**MINIO_EVENT["Records"][0], "eventName": "s3:ObjectRemoved:Delete"}]}
    with pytest.raises(SkipEvent):
        decode_arrival(orjson.dumps(deletion))


def test_minio_event_without_object_is_a_decode_error() -> None:
    broken = {"EventName": "s3:ObjectCreated:Put", "Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {}}]}
    with pytest.raises(DecodeError, match="missing field"):
        decode_arrival(orjson.dumps(broken))


def test_minio_schema_accepts_the_sample() -> None:
    import json

    from pipeline.catalog import topics_dir

    jsonschema.validate(MINIO_EVENT, json.loads((topics_dir() / "schemas" / "minio_event.json").read_text()))


@pytest.mark.parametrize("event", [
    {"Records": [1]},
    {"Records": [{"s3": "x"}]},
    {"Records": [{"s3": {"bucket": {"name": "b"}, "object": "x"}}]},
    {"Records": "x"},
    {"Records": [{"eventName": 5, "s3": {}}]},
    {"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": "x"}]},
    {"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": "x"}}]},
    {"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {"bucket": "b", "object": {"key": "k"}}}]},
    {"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": {"key": 7}}}]},
    {"Records": [{"eventName": "s3:ObjectCreated:Put",
                  "s3": {"bucket": {"name": "b"}, "object": {"key": "k", "userMetadata": [1]}}}]},
], ids=repr)
def test_hostile_minio_shapes_are_decode_errors(event: dict) -> None:
    with pytest.raises(DecodeError):
        decode_arrival(orjson.dumps(event))
