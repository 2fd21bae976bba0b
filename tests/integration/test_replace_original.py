"""Issue 31's optional policy `callqa redact --replace-original` on the real broker and MinIO.

The stage writes its redacted copy and then the copy's bytes over the original (one conditional PUT,
If-Match the transcribed ETag), removes the transcribed version from the versioned recordings bucket,
and says so in audio.redacted (original_replaced). A second group over the same transcripts finds its
mark on the key and publishes without a dead letter; the router skips the replacement's own arrival.
The other tests drive the redaction step (pipeline/run/redact_step.py) in this process against the
real server: a key written again since, a converted copy, a stop between the put and the removal,
an unversioned bucket, and the MinIO policy the redaction user needs for it.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import orjson
import pytest
import soundfile as sf
from minio import Minio
from minio.credentials import StaticProvider
from minio.error import S3Error
from minio.minioadmin import MinioAdmin
from pydantic import SecretStr

from pipeline.adapters.minio_store import MinioStore, retrying_store, storage_client
from pipeline.config import Settings
from pipeline.events import AudioRedacted, DeadLetter, ObjectRef, PIISpan, SourcePosition, decode, encode
from pipeline.run.redact_step import Redactor, TranscriptRedaction
from pipeline.stack.minio import prepare_bucket, prepare_copies_bucket
from pipeline.stages.audio_redaction import GUARD_S
from pipeline.stages.outputs import Received, Writer, plan_route
from pipeline.stages.redacted_copies import Target
from pipeline.stages.replaced_originals import REDACTED_COPY, REDACTED_FROM
from pipeline.stages.retry import RetryingStore
from pipeline.stages.router import ArrivalRouter, Skipped
from pipeline.stages.routing import Buckets
from pipeline.stages.storage import StorageRefused
from tests.kafka_helpers import TopicReader, consume, produce
from tests.processes import spawn, stop
from tests.samples import pii_transcript

pytestmark = pytest.mark.integration

PREFIX = "copies/"
RATE = 8000
CARD = PIISpan(type="bank_card", role="customer", start_s=1.5, end_s=3.0)
SOURCE = SourcePosition(topic="asr.transcripts", partition=0, offset=0)
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "minio"


def pcm_call(seed: int, seconds: float = 5.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-3000, 3000, size=(int(seconds * RATE), 2), dtype=np.int16)


def encoded(pcm: np.ndarray, fmt: str = "WAV", subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm, RATE, subtype=subtype, format=fmt)
    return buf.getvalue()


def put(client: Minio, bucket: str, key: str, data: bytes, **meta: str) -> ObjectRef:
    """Put as a recorder would (with its user metadata); the ref a transcript of it names."""
    stored = client.put_object(bucket, key, io.BytesIO(data), len(data), metadata=meta or None)
    return ObjectRef(bucket=bucket, key=key, version_id=stored.version_id, etag=stored.etag, size_bytes=len(data))


def read(client: Minio, bucket: str, key: str, version_id: str | None = None) -> bytes:
    resp = client.get_object(bucket, key, version_id=version_id)
    try:
        return resp.read()
    finally:
        resp.close()
        resp.release_conn()


def versions(client: Minio, bucket: str, key: str) -> list[tuple[str | None, str | None]]:
    """(version id, etag) of every version of exactly ``key``."""
    return [
        (o.version_id, (o.etag or "").strip('"'))
        for o in client.list_objects(bucket, prefix=key, include_version=True)
        if o.object_name == key
    ]


def assert_cut(data: bytes, original: np.ndarray, spans: list[PIISpan]) -> None:
    """The customer's channel silent over each span plus guard, every other sample bit-identical."""
    redacted, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE and redacted.shape == original.shape
    cut = np.zeros(len(original), dtype=bool)
    for s in spans:
        cut[max(0, int(np.floor((s.start_s - GUARD_S) * rate))) : int(np.ceil((s.end_s + GUARD_S) * rate))] = True
    assert cut.any() and not redacted[cut, 1].any()
    assert np.array_equal(redacted[~cut, 1], original[~cut, 1])
    assert np.array_equal(redacted[:, 0], original[:, 0])


def of_topic(reader: TopicReader, suffix: str, model):  # noqa: ANN001, ANN201
    return [decode(m.value(), model) for m in reader.messages if m.topic().endswith(suffix)]


@pytest.fixture
def copies(settings: Settings, unique: str) -> Settings:
    cfg = settings.model_copy(update={"redact_bucket": f"red-{unique}", "redact_prefix": PREFIX})
    prepare_copies_bucket(storage_client(cfg), cfg.redact_bucket)
    return cfg


def test_the_stage_replaces_the_original_and_a_second_group_and_the_router_see_it_done(
    copies: Settings, unique: str, tmp_path: Path
) -> None:
    cfg = copies
    client = storage_client(cfg)
    pcm, lossy_pcm = pcm_call(1), pcm_call(2)
    wav = put(client, cfg.recordings_bucket, "2026/12/05/card.wav", encoded(pcm), roles="left=agent,right=customer")
    ogg = put(client, cfg.recordings_bucket, "2026/12/05/lossy.ogg", encoded(lossy_pcm, "OGG", "VORBIS"))
    transcripts = [
        pii_transcript(wav, [CARD], call_id="card", duration_s=5.0),
        pii_transcript(ogg, [CARD], call_id="lossy", duration_s=5.0),
    ]
    produce(cfg, "asr.transcripts", [(t.call_id.encode(), encode(t)) for t in transcripts])

    reader = TopicReader(cfg, ["audio.redacted", "redact.dlq"])
    env = {"redact_bucket": cfg.redact_bucket, "redact_prefix": PREFIX}
    log = tmp_path / "redact.log"
    first = spawn(cfg, log, "redact", "--group", f"redact-{unique}", "--replace-original", **env)
    try:
        reader.wait_for(lambda _: len(of_topic(reader, "audio.redacted", AudioRedacted)), 2, timeout_s=180, settle_s=3)
    finally:
        stop(first)
    assert of_topic(reader, "redact.dlq", DeadLetter) == [], log.read_text()[-3000:]
    events = {e.call_id: e for e in of_topic(reader, "audio.redacted", AudioRedacted)}
    assert set(events) == {"card", "lossy"}, log.read_text()[-3000:]
    event = events["card"]
    assert event.original_replaced and not event.converted
    assert event.key == f"{PREFIX}{cfg.recordings_bucket}/{wav.key}" and event.source == wav

    # The key holds the copy's bytes: the span cut, the rest bit-identical; the transcribed version is gone.
    now = read(client, cfg.recordings_bucket, wav.key)
    assert (
        hashlib.sha256(now).hexdigest()
        == event.sha256
        == hashlib.sha256(read(client, event.bucket, event.key)).hexdigest()
    )
    assert_cut(now, pcm, [CARD])
    kept = versions(client, cfg.recordings_bucket, wav.key)
    assert wav.etag not in [etag for _, etag in kept] and wav.version_id not in [v for v, _ in kept], kept
    assert len(kept) == 1
    meta = {k.lower(): v for k, v in (client.stat_object(cfg.recordings_bucket, wav.key).metadata or {}).items()}
    assert meta[f"x-amz-meta-{REDACTED_FROM}"] == wav.etag
    assert meta[f"x-amz-meta-{REDACTED_COPY}"] == f"{event.bucket}/{event.key}"
    assert meta["x-amz-meta-roles"] == "left=agent,right=customer"  # the recorder's metadata stays

    # A lossy original: its copy is a WAV under another name, so the original is kept as it was.
    lossy = events["lossy"]
    assert lossy.converted and not lossy.original_replaced and lossy.key.endswith(".ogg.wav")
    assert versions(client, cfg.recordings_bucket, ogg.key) == [(ogg.version_id, ogg.etag)]

    # A second group over the same transcripts (the original already replaced): no object_changed,
    # one event per transcript, naming the copy as stored.
    second = spawn(cfg, log, "redact", "--group", f"redact2-{unique}", "--replace-original", **env)
    try:
        reader.wait_for(lambda _: len(of_topic(reader, "audio.redacted", AudioRedacted)), 4, timeout_s=180, settle_s=3)
    finally:
        stop(second)
    assert of_topic(reader, "redact.dlq", DeadLetter) == [], log.read_text()[-3000:]
    again = [e for e in of_topic(reader, "audio.redacted", AudioRedacted) if e.call_id == "card"]
    assert len(again) == 2, log.read_text()[-3000:]
    assert again[1].original_replaced and (again[1].key, again[1].sha256, again[1].size_bytes) == (
        event.key,
        event.sha256,
        event.size_bytes,
    )
    assert (again[1].format, again[1].subtype, again[1].sample_rate_hz, again[1].channels) == ("WAV", "PCM_16", RATE, 2)
    assert len(versions(client, cfg.recordings_bucket, wav.key)) == 1  # nothing written again

    # MinIO's own notification of the replacement (on audio.arrivals) is not routed as a new call.
    def ours(msg) -> bool:  # noqa: ANN001
        record = orjson.loads(msg.value())["Records"][0]
        obj = record["s3"]["object"]
        return record["s3"]["bucket"]["name"] == cfg.recordings_bucket and obj["versionId"] == kept[0][0]

    unprefixed = cfg.model_copy(update={"topic_prefix": ""})  # the stack's own topic, where MinIO publishes
    [arrival] = consume(unprefixed, cfg.arrivals, 1, timeout_s=60, keep=ours)
    router = ArrivalRouter(
        store=retrying_store(cfg),
        buckets=Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong")),
        partitions_of=lambda b: 4,
        max_duration_s=3600,
        accept_buckets=frozenset({cfg.recordings_bucket}),
    )
    outcome = router.route(arrival.value(), arrival.key(), set())
    assert outcome == Skipped("redacted_original")
    assert plan_route(outcome, Received(arrival.value(), arrival.key()), Writer()) == []


def redaction(cfg: Settings, store: RetryingStore | None = None) -> TranscriptRedaction:
    redactor = Redactor(store or retrying_store(cfg), Target(cfg.redact_bucket, PREFIX), "silence", 1 << 30, True)
    return TranscriptRedaction(redactor, Writer(group="callqa-redact"), "redact.retry")


class RemovalRefused(RetryingStore):
    """The real store, but removing a version is refused (as for a stop between the put and the removal)."""

    def remove_version(self, ref: ObjectRef) -> None:
        raise StorageRefused(f"remove {ref.bucket}/{ref.key}: AccessDenied (refused by the test)")


def handle(cfg: Settings, ref: ObjectRef, store: RetryingStore | None = None):  # noqa: ANN201
    (record,) = redaction(cfg, store).handle(
        Received(encode(pii_transcript(ref, [CARD], duration_s=5.0)), b"c", SOURCE)
    )
    return record


@pytest.fixture
def buckets(stack_settings: Settings, unique: str) -> Settings:
    """A versioned recordings bucket (no topics: the step runs in this process) and a copies bucket."""
    cfg = stack_settings.model_copy(
        update={"recordings_bucket": f"rec-{unique}", "redact_bucket": f"red-{unique}", "redact_prefix": PREFIX}
    )
    client = storage_client(cfg)
    prepare_bucket(client, cfg.recordings_bucket)
    prepare_copies_bucket(client, cfg.redact_bucket)
    return cfg


def test_a_key_written_again_since_its_transcript_is_not_overwritten(buckets: Settings) -> None:
    cfg, client = buckets, storage_client(buckets)
    old = put(client, cfg.recordings_bucket, "call.wav", encoded(pcm_call(3)))
    newer = put(client, cfg.recordings_bucket, "call.wav", encoded(pcm_call(4)))  # a new call at the key
    record = handle(cfg, old)
    assert record.letter is not None and record.letter.reason == "object_changed", record.letter
    assert sorted(versions(client, cfg.recordings_bucket, "call.wav")) == sorted(
        [(newer.version_id, newer.etag), (old.version_id, old.etag)]
    )


def test_a_stop_between_the_put_and_the_removal_is_finished_by_the_next_delivery(buckets: Settings) -> None:
    cfg, client = buckets, storage_client(buckets)
    pcm = pcm_call(5)
    ref = put(client, cfg.recordings_bucket, "call.wav", encoded(pcm))
    refused = RemovalRefused(MinioStore(client), retrying_store(cfg).backoff)
    record = handle(cfg, ref, refused)
    assert record.letter is not None and record.letter.reason == "write_failed"
    assert "replacing the original" in record.letter.message
    assert len(versions(client, cfg.recordings_bucket, "call.wav")) == 2  # replaced; the original still there

    record = handle(cfg, ref)  # delivered again: not written again, the original's version removed
    assert record.topic == "audio.redacted", record.letter
    event = decode(record.value, AudioRedacted)
    assert event.original_replaced
    [(version, etag)] = versions(client, cfg.recordings_bucket, "call.wav")
    assert etag != ref.etag and version != ref.version_id
    assert_cut(read(client, cfg.recordings_bucket, "call.wav"), pcm, [CARD])

    record = handle(cfg, ref)  # and again: the version is gone, the mark says done
    assert record.topic == "audio.redacted", record.letter
    assert decode(record.value, AudioRedacted).sha256 == event.sha256


def test_an_unversioned_recordings_bucket_is_overwritten_and_a_redelivery_is_done(buckets: Settings) -> None:
    cfg, client = buckets, storage_client(buckets)
    bucket = f"{cfg.recordings_bucket}-plain"
    client.make_bucket(bucket)
    pcm = pcm_call(6)
    ref = put(client, bucket, "call.wav", encoded(pcm))
    assert ref.version_id is None
    first = decode(handle(cfg, ref).value, AudioRedacted)
    assert first.original_replaced
    assert_cut(read(client, bucket, "call.wav"), pcm, [CARD])
    assert versions(client, bucket, "call.wav")[0][1] != ref.etag
    again = handle(cfg, ref)  # the If-Match read is refused (object_changed), but the key holds our mark
    assert again.topic == "audio.redacted", again.letter
    assert decode(again.value, AudioRedacted).sha256 == first.sha256


def policy(name: str, **fill: str) -> dict:
    text = (DEPLOY / name).read_text()
    for placeholder, value in fill.items():
        text = text.replace(placeholder, value)
    return json.loads(text)


def test_the_redaction_user_replaces_originals_only_with_the_replace_policy(buckets: Settings, unique: str) -> None:
    root = buckets
    admin = MinioAdmin(
        endpoint=root.s3_endpoint,
        credentials=StaticProvider(root.s3_access_key, root.s3_secret_key.get_secret_value()),
        secure=root.s3_secure,
    )
    fill = {"RECORDINGS_BUCKET": root.recordings_bucket, "REDACT_BUCKET": root.redact_bucket, "REDACT_PREFIX": PREFIX}
    user, secret = f"redact-{unique}", f"secret-{unique}-x"
    admin.policy_add(f"callqa-redact-{unique}", policy=policy("callqa-redact-policy.json", **fill))
    admin.policy_add(f"callqa-redact-replace-{unique}", policy=policy("callqa-redact-replace-policy.json", **fill))
    admin.user_add(user, secret)
    admin.attach_policy([f"callqa-redact-{unique}"], user=user)
    cfg = root.model_copy(update={"s3_access_key": user, "s3_secret_key": SecretStr(secret)})
    client = storage_client(root)
    ref = put(client, root.recordings_bucket, "call.wav", encoded(pcm_call(7)))

    record = handle(cfg, ref)  # the copies policy alone: the copy is written, the original may not be
    assert record.letter is not None and record.letter.reason == "write_failed"
    assert "AccessDenied" in record.letter.message and "replacing the original" in record.letter.message
    assert versions(client, root.recordings_bucket, "call.wav") == [(ref.version_id, ref.etag)]

    admin.attach_policy([f"callqa-redact-replace-{unique}"], user=user)
    record = handle(cfg, ref)
    assert record.topic == "audio.redacted", record.letter
    assert decode(record.value, AudioRedacted).original_replaced
    assert ref.etag not in [etag for _, etag in versions(client, root.recordings_bucket, "call.wav")]
    with pytest.raises(S3Error) as denied:  # still no write outside the recordings and the copies
        storage_client(cfg).put_object(root.redact_bucket, "top-level.wav", io.BytesIO(b"x"), 1)
    assert denied.value.code == "AccessDenied"
