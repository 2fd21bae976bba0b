"""The Faust redaction stage: asr.transcripts → redacted copies in the object store + audio.redacted (or redact.dlq).

A consumer group of its own beside QA, not a step of the ASR worker: the worker's batch loop
stays free of object-store writes (a slow put would hold a GPU batch's transaction open), and an
operator runs, replays and scales redaction alone. A thin adapter: the decisions (spans, key,
event, dead-letter reason) are :mod:`pipeline.stages.redacted_copies`; the cut and the encoding are
:func:`pipeline.run.redacted_audio.redacted_copy`, shared with ``callqa run --redact-audio``.

Per transcript with PII: read the original (conditional on its etag), cut, write the copy under its
deterministic key, then send the event in the input partition's transaction (exactly once). A
stage killed between the put and the commit reads the transcript again and writes the same key
again. A transcript without PII: nothing written, nothing sent.
"""

from __future__ import annotations

import asyncio
import time

import faust
from prometheus_client import Counter

from pipeline.adapters.faust_app import (
    abort_open_transactions_on_revoke,
    create_faust_app,
    send_in_source_transaction,
    stop_transactions_of_lost_partitions,
    watch_health,
)
from pipeline.adapters.minio_store import retrying_store, storage_client
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.events import AudioRedacted, ObjectRef, SourcePosition, encode
from pipeline.headers import addressed_to
from pipeline.logs import get_logger
from pipeline.run.redacted_audio import redacted_copy
from pipeline.runtime.health import StageHealth
from pipeline.stages.audio_redaction import Mode
from pipeline.stages.outcomes import Dead
from pipeline.stages.outputs import stamped
from pipeline.stages.redacted_copies import (
    NothingToRedact,
    Phase,
    Redact,
    Target,
    check_matches,
    copy_metadata,
    letter_for,
    plan_payload,
    probe_recording,
    redacted_event,
)
from pipeline.stages.retry import RetryingStore
from pipeline.stages.sizes import MessageLimits, too_large_letter
from pipeline.stages.storage import ObjectInfo, StorageRefused

log = get_logger("callqa.redact")
REDACTED = Counter("callqa_redact_copies_total", "Redacted copies written")
SPANS = Counter("callqa_redact_spans_total", "PII spans cut", ["type"])
DEAD = Counter("callqa_redact_dead_lettered_total", "Transcripts dead-lettered by the redaction stage", ["reason"])


class Redactor:
    """Read, cut, write and verify one copy; a failure is a dead letter, never an exception."""

    def __init__(self, store: RetryingStore, target: Target, mode: Mode, max_copy_bytes: int) -> None:
        self.store, self.target, self.mode, self.max_copy_bytes = store, target, mode, max_copy_bytes

    def run(
        self, plan: Redact, payload: bytes, key: bytes | None, source: SourcePosition
    ) -> AudioRedacted | Dead[None]:
        phase: Phase = "read"
        try:
            data = self.store.read(plan.transcript.object)  # If-Match its etag: a rewritten key is refused
            info = probe_recording(data)
            check_matches(info, plan.transcript)
            copy = redacted_copy(data, info, plan.channel_spans, plan.key, self.mode, self.max_copy_bytes)
            phase = "write"
            stored = self.store.put(
                self.target.bucket, copy.name, copy.data, copy.content_type, copy_metadata(plan, self.mode)
            )
            ref = ObjectRef(bucket=self.target.bucket, key=copy.name, version_id=stored.version_id)
            _verify(self.store.stat(ref), stored, len(copy.data), f"{self.target.bucket}/{copy.name}")
        except Exception as exc:  # noqa: BLE001 - every failure is this call's letter; the stage goes on
            return letter_for(exc, phase, payload, key, source)
        return redacted_event(
            plan,
            bucket=self.target.bucket,
            key=copy.name,
            data=copy.data,
            version_id=stored.version_id,
            format=copy.format,
            subtype=copy.subtype,
            converted=copy.converted,
            sample_rate_hz=copy.sample_rate_hz,
            channels=copy.channels,
            mode=self.mode,
        )


def _verify(found: ObjectInfo, stored: ObjectInfo, size_bytes: int, where: str) -> None:
    """The copy as stored is the one just written: its size, and the ETag the put answered with.
    (Not the ETag against an MD5 of the bytes: with server-side encryption it is no MD5. The bytes
    themselves are checked in transit by the request's SigV4 payload hash.)"""
    if found.size_bytes != size_bytes or (stored.etag and found.etag != stored.etag):
        raise StorageRefused(
            f"{where}: stored copy is {found.size_bytes} bytes, etag {found.etag}; written {size_bytes} bytes, "
            f"etag {stored.etag} (verification failed)"
        )


def check_target(settings: Settings) -> None:
    """At start: the copies' bucket exists (a missing one would dead-letter every call)."""
    bucket = settings.redact_bucket
    if bucket == settings.recordings_bucket:
        raise ConfigError(
            f"redact_bucket {bucket!r} is the recordings bucket: its notification would route every copy as a call"
        )
    try:
        exists = storage_client(settings).bucket_exists(bucket)
    except Exception as exc:  # noqa: BLE001 - unreachable or refused: said at start, not as a traceback
        raise ConfigError(f"cannot check redact_bucket {bucket!r}: {type(exc).__name__}: {exc}") from None
    if not exists:
        raise ConfigError(
            f"redact_bucket {bucket!r} does not exist (create it, or `callqa stack up` on the local stack)"
        )


def create_app(
    settings: Settings, group: str = "callqa-redact", health: StageHealth | None = None, mode: Mode | None = None
) -> faust.App:
    target = Target(settings.redact_bucket, settings.redact_prefix)
    redactor = Redactor(retrying_store(settings), target, mode or settings.redact_with, settings.redact_max_copy_bytes)
    app = create_faust_app(settings, group)
    input_name, retry_name = settings.topic("asr.transcripts"), settings.topic("redact.retry")
    transcripts = app.topic(
        input_name, retry_name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    redacted = settings.topic("audio.redacted")
    dlq = settings.topic("redact.dlq")
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    watch_health(app, health, input_name)
    for name in (input_name, retry_name):
        stop_transactions_of_lost_partitions(app, name)
        abort_open_transactions_on_revoke(app, name)

    @app.agent(transcripts)
    async def redact(stream: faust.Stream) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            msg = event.message
            if msg.topic == retry_name and not addressed_to(event.headers, group):
                continue  # a redrive for another redaction group
            logger = log.bind(topic=msg.topic, partition=msg.partition, offset=msg.offset)
            source = SourcePosition(topic=msg.topic, partition=msg.partition, offset=msg.offset)
            started = time.perf_counter()
            planned = plan_payload(event.value, event.key, target, source)
            if isinstance(planned, NothingToRedact):
                continue  # no PII span: no copy, no event (the transcript's empty pii says so)
            # Off the event loop: reading, cutting and writing a long call must not stall heartbeats.
            outcome = (
                planned
                if isinstance(planned, Dead)
                else await loop.run_in_executor(None, redactor.run, planned, event.value, event.key, source)
            )
            if isinstance(outcome, AudioRedacted):
                key, value = outcome.call_id.encode(), encode(outcome)
                if not limits.fits("audio.redacted", key, value):
                    outcome = Dead(
                        too_large_letter(
                            stage="redact",
                            topic=redacted,
                            size_bytes=len(value),
                            limit_bytes=limits.limit("audio.redacted"),
                            payload=event.value,
                            key=event.key,
                            source=source,
                        )
                    )
            if isinstance(outcome, Dead):
                letter = stamped(outcome.letter, event.headers, group)
                await send_in_source_transaction(
                    app, msg, dlq, event.key, limits.letter("redact.dlq", event.key, letter)
                )
                DEAD.labels(letter.reason).inc()
                logger.warning("transcript_dead_lettered", reason=letter.reason, message=letter.message)
                continue
            await send_in_source_transaction(app, msg, redacted, key, value)
            REDACTED.inc()
            for span in outcome.spans:
                SPANS.labels(span.type).inc()
            logger.info(
                "call_redacted",
                call_id=outcome.call_id,
                bucket=outcome.bucket,
                key=outcome.key,
                spans=len(outcome.spans),
                bytes=outcome.size_bytes,
                ms=round((time.perf_counter() - started) * 1000, 2),
            )

    return app
