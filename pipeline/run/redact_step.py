"""The Faust redaction stage's per-event handling, without Faust: one transcript in, the records to write out.

:class:`TranscriptRedaction` holds what the agent in :mod:`pipeline.run.redact` does with an event
between reading it and writing it: pass over a redrive for another group, plan the copy
(:func:`~pipeline.stages.redacted_copies.plan_payload`), read, cut, write and verify it
(:class:`Redactor`; with ``redact_replace_original`` also write it over the original, the
decisions in :mod:`pipeline.stages.replaced_originals`), plan its records
(:func:`~pipeline.stages.outputs.plan_redacted`, the planner the router, worker and QA outputs go
through as well), and count and log the outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import Counter

from pipeline.events import AudioRedacted, ObjectRef, SourcePosition
from pipeline.headers import HeadersLike
from pipeline.logs import get_logger
from pipeline.run.redacted_audio import RedactedCopy, redacted_copy, stored_copy
from pipeline.run.step_frame import bound_to_source, dead_record, is_own_redrive
from pipeline.stages.audio_redaction import Mode
from pipeline.stages.outcomes import Dead
from pipeline.stages.outputs import Received, Record, Writer, plan_redacted
from pipeline.stages.redacted_copies import (
    NothingToRedact,
    Phase,
    Redact,
    RedactedOutcome,
    RedactOutcome,
    Target,
    check_matches,
    copy_metadata,
    letter_for,
    plan_payload,
    probe_recording,
    redacted_event,
)
from pipeline.stages.replaced_originals import (
    check_replaceable,
    kept_because,
    replaced_by,
    replacement_metadata,
    version_to_remove,
)
from pipeline.stages.retry import RetryingStore
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectInfo, StorageRefused

log = get_logger("callqa.redact")
REDACTED = Counter("callqa_redact_copies_total", "Redacted copies written")
SPANS = Counter("callqa_redact_spans_total", "PII spans cut", ["type"])
DEAD = Counter("callqa_redact_dead_lettered_total", "Transcripts dead-lettered by the redaction stage", ["reason"])
REPLACED = Counter(
    "callqa_redact_originals_replaced_total",
    "audio.redacted events whose original was replaced by its copy (redact_replace_original; a redelivery counts again)",
)
KEPT = Counter(
    "callqa_redact_originals_kept_total",
    "Originals redact_replace_original could not replace (converted: the copy of a lossy recording is a WAV; "
    "no_etag: the transcript names no content to write against)",
    ["why"],
)


class Redactor:
    """Read, cut, write and verify one copy (and, with ``replace_original``, write it over the original);
    a failure is a dead letter, never an exception."""

    def __init__(
        self, store: RetryingStore, target: Target, mode: Mode, max_copy_bytes: int, replace_original: bool = False
    ) -> None:
        self.store, self.target, self.mode, self.max_copy_bytes = store, target, mode, max_copy_bytes
        self.replace_original = replace_original

    def run(
        self, plan: Redact, payload: bytes, key: bytes | None, source: SourcePosition | None
    ) -> AudioRedacted | Dead[None]:
        phase: Phase = "read"
        replaced = False
        try:
            try:
                data = self.store.read(plan.transcript.object)  # If-Match its etag: a rewritten key is refused
            except (ObjectChanged, MissingObject):
                done = self._replaced_before(plan) if self.replace_original else None
                if done is None:
                    raise
                return done
            info = probe_recording(data)
            check_matches(info, plan.transcript)
            copy = redacted_copy(data, info, plan.channel_spans, plan.key, self.mode, self.max_copy_bytes)
            phase = "write"
            stored = self.store.put(
                self.target.bucket, copy.name, copy.data, copy.content_type, copy_metadata(plan, self.mode)
            )
            ref = ObjectRef(bucket=self.target.bucket, key=copy.name, version_id=stored.version_id)
            _verify(self.store.stat(ref), stored, len(copy.data), f"{self.target.bucket}/{copy.name}")
            if self.replace_original and kept_because(copy.converted, plan.transcript.object) is None:
                phase = "replace"
                self._replace(plan, copy, stored.version_id)
                replaced = True
        except Exception as exc:  # noqa: BLE001 - every failure is this call's letter; the stage goes on
            return letter_for(exc, phase, payload, key, source)
        return self._event(plan, copy, stored.version_id, self.mode, replaced)

    def _event(
        self, plan: Redact, copy: RedactedCopy, version_id: str | None, mode: Mode, replaced: bool
    ) -> AudioRedacted:
        return redacted_event(
            plan,
            bucket=self.target.bucket,
            key=copy.name,
            data=copy.data,
            version_id=version_id,
            format=copy.format,
            subtype=copy.subtype,
            converted=copy.converted,
            sample_rate_hz=copy.sample_rate_hz,
            channels=copy.channels,
            mode=mode,
            original_replaced=replaced,
        )

    def _replace(self, plan: Redact, copy: RedactedCopy, copy_version: str | None) -> None:
        """Write the copy over the original (only while it is the transcribed content), verify it, and
        remove the original's version. A key that already holds this transcript's replacement (a
        delivery after a stop between the put and the commit) is not written again; its version is
        still removed (a stop between the put and the removal)."""
        source = plan.transcript.object
        at_key = ObjectRef(bucket=source.bucket, key=source.key)
        current = self.store.stat(at_key)  # the current version, whatever it is
        original: ObjectInfo | None = None
        if replaced_by(current.metadata, source, self.target.bucket, copy.name) is None:
            check_replaceable(current, source)
            original = current
            marks = replacement_metadata(
                current.metadata, source, self.target.bucket, copy.name, copy_version, self.mode
            )
            try:
                stored = self.store.put_if_match(source, copy.data, copy.content_type, marks)
            except ObjectChanged:
                # Written since the stat: by another group replacing it for this same transcript (done),
                # or by anyone else (the letter object_changed).
                current = self.store.stat(at_key)
                if replaced_by(current.metadata, source, self.target.bucket, copy.name) is None:
                    raise
            else:
                where = f"{source.bucket}/{source.key}"
                written = ObjectRef(bucket=source.bucket, key=source.key, version_id=stored.version_id)
                _verify(self.store.stat(written), stored, len(copy.data), where)
                current = stored
        version = version_to_remove(source, original, current.version_id)
        if version is not None:
            self.store.remove_version(ObjectRef(bucket=source.bucket, key=source.key, version_id=version))

    def _replaced_before(self, plan: Redact) -> AudioRedacted | None:
        """The transcript's original is gone or rewritten: where the key holds this transcript's own
        replacement, the policy's work is done and the event names the copy as stored (read back from
        the copies' bucket: its hash, size and format). None: not replaced by us (the read's letter)."""
        source = plan.transcript.object
        current = self.store.stat(ObjectRef(bucket=source.bucket, key=source.key))
        mark = replaced_by(current.metadata, source, self.target.bucket, plan.key)
        if mark is None:
            return None
        # (The transcribed version is gone already: the read of it failed. A stop between the put and
        # the removal leaves it readable, and that delivery goes through _replace, which removes it.)
        ref = ObjectRef(bucket=self.target.bucket, key=plan.key, version_id=mark.copy_version)
        try:
            data = self.store.read(ref)
        except MissingObject as exc:
            raise MissingObject(
                f"{source.bucket}/{source.key} was replaced by its redacted copy, and that copy is gone: {exc}"
            ) from exc
        copy = stored_copy(data, plan.key)
        mode: Mode = self.mode
        if mark.mode == "tone" or mark.mode == "silence":
            mode = mark.mode  # as it was cut, whatever this process's setting
        return self._event(plan, copy, mark.copy_version, mode, True)


def _verify(found: ObjectInfo, stored: ObjectInfo, size_bytes: int, where: str) -> None:
    """The copy as stored is the one just written: its size, and the ETag the put answered with.
    (Not the ETag against an MD5 of the bytes: with server-side encryption it is no MD5. The bytes
    themselves are checked in transit by the request's SigV4 payload hash.)"""
    if found.size_bytes != size_bytes or (stored.etag and found.etag != stored.etag):
        raise StorageRefused(
            f"{where}: stored copy is {found.size_bytes} bytes, etag {found.etag}; written {size_bytes} bytes, "
            f"etag {stored.etag} (verification failed)"
        )


@dataclass
class TranscriptRedaction:
    redactor: Redactor
    writer: Writer  # the redaction group's: limits, group name, physical topic names
    retry_topic: str  # physical name of redact.retry

    def wanted(self, topic: str, headers: HeadersLike) -> bool:
        """False for a redrive addressed to another redaction group."""
        return is_own_redrive(topic, headers, self.retry_topic, self.writer.group)

    def planned(self, received: Received) -> RedactOutcome:
        """Decode and plan (quick, no I/O; never raises)."""
        return plan_payload(received.payload, received.key, self.redactor.target, received.source)

    def redact(self, planned: RedactOutcome, received: Received) -> RedactedOutcome:
        """Blocking (reads, cuts and writes a whole recording; never raises): the agent runs it in an executor."""
        if not isinstance(planned, Redact):
            return planned
        return self.redactor.run(planned, received.payload, received.key, received.source)

    def plan(self, outcome: RedactedOutcome, received: Received) -> list[Record]:
        return plan_redacted(outcome, received, self.writer)

    def handle(self, received: Received) -> list[Record]:
        """Plan, redact, plan the records and account in one call (what the agent does, in this thread)."""
        started = time.perf_counter()
        outcome = self.redact(self.planned(received), received)
        records = self.plan(outcome, received)
        self.account(outcome, records, received, started)
        return records

    def account(self, outcome: RedactedOutcome, records: list[Record], received: Received, started: float) -> None:
        logger = bound_to_source(log, received)
        dead = dead_record(records)
        if dead is not None and dead.letter is not None:
            letter = dead.letter
            DEAD.labels(letter.reason).inc()
            logger.warning("transcript_dead_lettered", reason=letter.reason, message=letter.message)
            return
        if isinstance(outcome, NothingToRedact) or not isinstance(outcome, AudioRedacted):
            return  # no PII span: no copy, no event (the transcript's empty pii says so)
        REDACTED.inc()
        for span in outcome.spans:
            SPANS.labels(span.type).inc()
        kept = kept_because(outcome.converted, outcome.source) if self.redactor.replace_original else None
        if outcome.original_replaced:
            REPLACED.inc()
        elif kept is not None:
            KEPT.labels(kept).inc()
            logger.warning("original_kept", call_id=outcome.call_id, why=kept, copy=outcome.key)
        logger.info(
            "call_redacted",
            call_id=outcome.call_id,
            bucket=outcome.bucket,
            key=outcome.key,
            spans=len(outcome.spans),
            bytes=outcome.size_bytes,
            original_replaced=outcome.original_replaced,
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
