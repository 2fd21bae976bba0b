"""The redact_replace_original policy's pure decisions (pipeline/stages/replaced_originals.py), the
router's skip of a replaced original (pipeline/stages/router.py) and the event field it sets."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import orjson
import pytest

from pipeline.adapters.file_store import FileStore
from pipeline.catalog import load_schema
from pipeline.events import AudioArrived, AudioRedacted, ObjectRef, PIISpan, decode, decode_arrival, encode
from pipeline.stages.outputs import Received, Writer, plan_route
from pipeline.stages.redacted_copies import Redact, Target, plan, reason_for, redacted_event
from pipeline.stages.replaced_originals import (
    REDACTED_COPY,
    REDACTED_COPY_VERSION,
    REDACTED_FROM,
    REDACTED_WITH,
    check_replaceable,
    is_redacted_original,
    kept_because,
    replaced_by,
    replacement_metadata,
    version_to_remove,
)
from pipeline.stages.retry import StorageUnavailable
from pipeline.stages.router import ArrivalRouter, Routed, Skipped
from pipeline.stages.routing import Buckets
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectInfo, StorageRefused
from tests import audio
from tests.samples import pii_transcript

REF = ObjectRef(bucket="recordings", key="2026/12/05/call-9.wav", version_id="v1", etag="abc123", size_bytes=80044)
COPIES, COPY_KEY = "recordings-redacted", "site-a/recordings/2026/12/05/call-9.wav"
CARD = PIISpan(type="bank_card", role="customer", start_s=1.0, end_s=2.0)
BUCKETS = Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong"))


def marks(**extra: str) -> dict[str, str]:
    return replacement_metadata(extra, REF, COPIES, COPY_KEY, "c7", "silence")


def test_only_a_copy_in_the_recordings_own_format_replaces_it() -> None:
    assert kept_because(converted=False, source=REF) is None
    assert kept_because(converted=True, source=REF) == "converted"  # an MP3's copy is a WAV: kept
    assert kept_because(converted=False, source=REF.model_copy(update={"etag": None})) == "no_etag"
    assert kept_because(converted=False, source=REF.model_copy(update={"etag": '""'})) == "no_etag"


def test_the_replacement_keeps_the_recorders_metadata_and_carries_the_mark() -> None:
    meta = marks(roles="left=agent,right=customer", **{"call-id": "c-9", REDACTED_FROM: "older", "note": "café"})
    assert meta == {
        "roles": "left=agent,right=customer",
        "call-id": "c-9",
        REDACTED_FROM: "abc123",  # this replacement's, not an older mark
        REDACTED_COPY: f"{COPIES}/{COPY_KEY}",
        REDACTED_COPY_VERSION: "c7",
        REDACTED_WITH: "silence",
    }  # a value S3 headers cannot carry (not ASCII) is dropped
    quoted = replacement_metadata({}, REF.model_copy(update={"etag": '"abc123"'}), COPIES, COPY_KEY, None, "tone")
    assert quoted[REDACTED_FROM] == "abc123" and REDACTED_COPY_VERSION not in quoted


def test_the_mark_of_this_transcripts_replacement_is_recognised_and_no_other() -> None:
    mark = replaced_by(marks(), REF, COPIES, COPY_KEY)
    assert mark is not None and (mark.copy_bucket, mark.copy_key, mark.copy_version, mark.mode) == (
        COPIES,
        COPY_KEY,
        "c7",
        "silence",
    )
    assert replaced_by(marks(), REF.model_copy(update={"etag": '"abc123"'}), COPIES, COPY_KEY) is not None
    assert replaced_by({}, REF, COPIES, COPY_KEY) is None  # a plain recording
    assert replaced_by(marks(), REF.model_copy(update={"etag": "other"}), COPIES, COPY_KEY) is None  # other content
    replay_key = "site-a/_replay/r2/recordings/2026/12/05/call-9.wav"
    assert replaced_by(marks(), REF, COPIES, replay_key) is None  # a replayed transcript's copy is not this one
    assert replaced_by(marks(), REF.model_copy(update={"etag": None}), COPIES, COPY_KEY) is None


def test_only_the_transcribed_content_and_version_may_be_overwritten() -> None:
    check_replaceable(ObjectInfo(80044, "abc123", "v1", {}), REF)
    check_replaceable(ObjectInfo(80044, '"abc123"', None, {}), REF)  # an unversioned bucket
    check_replaceable(ObjectInfo(80044, "abc123", "v9", {}), REF.model_copy(update={"version_id": None}))
    with pytest.raises(ObjectChanged, match="not the transcribed abc123"):
        check_replaceable(ObjectInfo(90000, "fff", "v2", {}), REF)  # a new call at the key
    with pytest.raises(ObjectChanged, match="current version is v2"):
        check_replaceable(ObjectInfo(80044, "abc123", "v2", {}), REF)  # the same bytes put again


def test_the_version_removed_is_the_transcribed_one_and_never_the_replacement() -> None:
    before = ObjectInfo(80044, "abc123", "v1", {})
    assert version_to_remove(REF, before, "v2") == "v1"
    assert version_to_remove(REF, None, "v2") == "v1"  # the key held our replacement already
    unversioned = REF.model_copy(update={"version_id": None})
    assert version_to_remove(unversioned, ObjectInfo(80044, "abc123", None, {}), None) is None
    assert version_to_remove(unversioned, ObjectInfo(80044, "abc123", "null", {}), "null") is None
    assert version_to_remove(unversioned, ObjectInfo(80044, "abc123", "v0", {}), "v2") == "v0"
    assert version_to_remove(unversioned, None, "v2") is None
    assert version_to_remove(REF, before, "v1") is None


def test_a_failed_replacement_has_its_reason() -> None:
    assert reason_for(ObjectChanged("x"), "replace")[0] == "object_changed"
    assert reason_for(MissingObject("x"), "replace")[0] == "missing_object"
    reason, message = reason_for(StorageRefused("put recordings/k: AccessDenied"), "replace")
    assert reason == "write_failed" and message.startswith("replacing the original") and "AccessDenied" in message
    assert "storage unavailable" in reason_for(StorageUnavailable("down"), "replace")[1]


def test_the_event_says_whether_the_original_was_replaced_and_old_events_still_read() -> None:
    redact = plan(pii_transcript(REF, [CARD]), Target(COPIES, "site-a/"))
    assert isinstance(redact, Redact)
    fields = dict(
        bucket=COPIES,
        key=COPY_KEY,
        data=b"RIFF",
        version_id="c7",
        format="WAV",
        subtype="PCM_16",
        converted=False,
        sample_rate_hz=8000,
        channels=2,
        mode="silence",
    )
    replaced = redacted_event(redact, original_replaced=True, **fields)  # type: ignore[arg-type]
    assert replaced.original_replaced and not redacted_event(redact, **fields).original_replaced  # type: ignore[arg-type]
    schema = load_schema("audio_redacted")
    jsonschema.validate(orjson.loads(encode(replaced)), schema)
    old = orjson.loads(encode(replaced))
    del old["original_replaced"]  # as written before the policy existed
    jsonschema.validate(old, schema)
    assert decode(orjson.dumps(old), AudioRedacted, strict=True).original_replaced is False


def router(store: object) -> ArrivalRouter:
    return ArrivalRouter(store=store, buckets=BUCKETS, partitions_of=lambda b: 4, max_duration_s=3600)  # type: ignore[arg-type]


class NoStore:
    """A store the router must not call: the arrival itself says what it is."""

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        raise AssertionError("stat called")

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        raise AssertionError("read called")


def minio_event(user_metadata: dict[str, str]) -> bytes:
    """MinIO's notification of a put, as it publishes it (user metadata as X-Amz-Meta-* names)."""
    obj = {"key": "2026%2F12%2F05%2Fcall-9.wav", "size": 80044, "eTag": "def456", "versionId": "v2"}
    record = {"eventName": "s3:ObjectCreated:Put", "s3": {"bucket": {"name": "recordings"}, "object": obj}}
    obj["userMetadata"] = user_metadata  # type: ignore[assignment]
    return orjson.dumps({"EventName": "s3:ObjectCreated:Put", "Key": "recordings/x", "Records": [record]})


def test_the_router_skips_the_replacement_of_a_redacted_original_from_its_event() -> None:
    payload = minio_event({"X-Amz-Meta-Callqa-Redacted-From": "abc123", "content-type": "audio/wav"})
    assert decode_arrival(payload).metadata[REDACTED_FROM] == "abc123"
    assert is_redacted_original(decode_arrival(payload).metadata)
    outcome = router(NoStore()).route(payload, b"recordings/x", set())
    assert outcome == Skipped("redacted_original")
    assert plan_route(outcome, Received(payload, b"recordings/x"), Writer()) == []  # not routed, no letter
    assert not is_redacted_original(decode_arrival(minio_event({"X-Amz-Meta-Roles": "left=agent"})).metadata)


class MarkedFileStore(FileStore):
    """Local files whose stat says what a replaced original's stat says in MinIO."""

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        info = super().stat(ref)
        return ObjectInfo(info.size_bytes, info.etag, info.version_id, {REDACTED_FROM: "abc123"})


def test_the_router_skips_a_replacement_whose_event_did_not_carry_the_mark(tmp_path: Path) -> None:
    path = audio.write(tmp_path / "call.wav", 5.0, 8000, 2)
    arrival = encode(AudioArrived(object=ObjectRef(bucket="file", key=str(path))))  # an upstream event
    assert router(MarkedFileStore()).route(arrival, b"k", set()) == Skipped("redacted_original")
    assert isinstance(router(FileStore()).route(arrival, b"k", set()), Routed)  # an unmarked recording routes
