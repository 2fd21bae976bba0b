"""The Faust redaction stage: asr.transcripts → redacted copies in the object store + audio.redacted (or redact.dlq).

A consumer group of its own beside QA, not a step of the ASR worker: the worker's batch loop
stays free of object-store writes (a slow put would hold a GPU batch's transaction open), and an
operator runs, replays and scales redaction alone. A thin adapter: the decisions (spans, key,
event, dead-letter reason) are :mod:`pipeline.stages.redacted_copies`; the cut and the encoding are
:func:`pipeline.run.redacted_audio.redacted_copy`, shared with ``callqa run --redact-audio``; the
per-event handling and the records to write (:func:`pipeline.stages.outputs.plan_redacted`, as for
the other stages) are :mod:`pipeline.run.redact_step`.

Per transcript with PII: read the original (conditional on its etag), cut, write the copy under its
deterministic key, then send the event in the input partition's transaction (exactly once). A
stage killed between the put and the commit reads the transcript again and writes the same key
again. A transcript without PII: nothing written, nothing sent. With ``redact_replace_original`` the
copy's bytes also replace the original (:meth:`Redactor._replace`); the replacement carries a mark
that makes a later delivery of the same transcript a success, not ``object_changed``.
"""

from __future__ import annotations

import asyncio
import time

import faust

from pipeline.adapters.faust_app import (
    abort_open_transactions_on_revoke,
    create_faust_app,
    send_batch_in_source_transactions,
    stop_transactions_of_lost_partitions,
    watch_health,
)
from pipeline.adapters.minio_store import retrying_store, storage_client
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.events import SourcePosition
from pipeline.run.redact_step import Redactor, TranscriptRedaction
from pipeline.runtime.health import StageHealth
from pipeline.stages.audio_redaction import Mode
from pipeline.stages.outputs import Received, Writer
from pipeline.stages.redacted_copies import NothingToRedact, Target
from pipeline.stages.sizes import MessageLimits

__all__ = ["Redactor", "check_target", "create_app"]


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
    redactor = Redactor(
        retrying_store(settings),
        target,
        mode or settings.redact_with,
        settings.redact_max_copy_bytes,
        settings.redact_replace_original,
    )
    app = create_faust_app(settings, group)
    input_name, retry_name = settings.topic("asr.transcripts"), settings.topic("redact.retry")
    transcripts = app.topic(
        input_name, retry_name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    watch_health(app, health, input_name)
    stop_transactions_of_lost_partitions(app, [input_name, retry_name])
    abort_open_transactions_on_revoke(app)
    step = TranscriptRedaction(redactor, Writer(limits, group, None, settings.topic), retry_name)

    @app.agent(transcripts)
    async def redact(stream: faust.Stream) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            msg = event.message
            if not step.wanted(msg.topic, event.headers):
                continue  # a redrive for another redaction group
            received = Received(
                event.value,
                event.key,
                SourcePosition(topic=msg.topic, partition=msg.partition, offset=msg.offset),
                event.headers,
            )
            started = time.perf_counter()
            planned = step.planned(received)
            if isinstance(planned, NothingToRedact):
                continue  # no PII span: no copy, no event (the transcript's empty pii says so)
            # Off the event loop: reading, cutting and writing a long call must not stall heartbeats.
            outcome = await loop.run_in_executor(None, step.redact, planned, received)
            records = step.plan(outcome, received)
            await send_batch_in_source_transactions(
                app, [(msg, [(settings.topic(r.topic), r.key, r.value, None, None) for r in records])], [msg]
            )
            step.account(outcome, records, received, started)

    return app
