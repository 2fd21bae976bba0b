"""The redaction stage's output planner (pipeline/stages/outputs.plan_redacted) and its per-event step
(pipeline/run/redact_step): the same letters, stamps and size limits as the router, worker and QA."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from pipeline.adapters.file_store import FileStore
from pipeline.events import (
    AudioRedacted,
    DeadLetter,
    ObjectRef,
    PIISpan,
    SourcePosition,
    Transcript,
    decode,
    encode,
)
from pipeline.headers import REDRIVE_ATTEMPT, REPLAY_GENERATION, RETRY_GROUP
from pipeline.run.redact_step import Redactor, TranscriptRedaction
from pipeline.stages.outputs import Received, Writer, plan_redacted
from pipeline.stages.redacted_copies import NothingToRedact, Redact, Target, letter_for, plan, redacted_event
from pipeline.stages.retry import Backoff, RetryingStore
from pipeline.stages.sizes import FRAMING_BYTES, MessageLimits
from pipeline.stages.storage import MissingObject, ObjectInfo, StorageError
from tests.samples import pii_transcript

TARGET = Target("recordings-redacted", "copies/")
SOURCE = SourcePosition(topic="asr.transcripts", partition=1, offset=9)
CARD = PIISpan(type="bank_card", role="customer", start_s=0.4, end_s=1.2, confidence=0.6, word_timed=True)
GROUP = "callqa-redact"


REF = ObjectRef(bucket="recordings", key="2026/12/03/call-7.wav", etag="e1")


def transcript(ref: ObjectRef, pii: list[PIISpan]) -> Transcript:
    return pii_transcript(ref, pii, call_id="call-7")


PAYLOAD = encode(transcript(REF, [CARD]))


def received(headers: list[tuple[str, bytes]] | None = None, topic: str = "asr.transcripts") -> Received:
    source = SourcePosition(topic=topic, partition=SOURCE.partition, offset=SOURCE.offset)
    return Received(PAYLOAD, b"call-7", source, headers or [])


def event_of(p: Redact, data: bytes = b"RIFF copy") -> AudioRedacted:
    return redacted_event(
        p,
        bucket=TARGET.bucket,
        key=p.key,
        data=data,
        version_id="v1",
        format="WAV",
        subtype="PCM_16",
        converted=False,
        sample_rate_hz=8000,
        channels=2,
        mode="silence",
    )


def test_a_written_copy_is_one_event_on_audio_redacted_keyed_by_its_call() -> None:
    p = plan(transcript(REF, [CARD]), TARGET)
    assert isinstance(p, Redact)
    event = event_of(p)
    (record,) = plan_redacted(event, received(), Writer(group=GROUP))
    assert (record.topic, record.key, record.letter, record.partition) == ("audio.redacted", b"call-7", None, None)
    assert decode(record.value, AudioRedacted) == event


def test_a_transcript_without_pii_writes_nothing() -> None:
    assert plan_redacted(NothingToRedact("call-7"), received(), Writer(group=GROUP)) == []


def test_a_failure_is_a_letter_on_redact_dlq_stamped_like_every_stage() -> None:
    dead = letter_for(MissingObject("recordings/x.wav: NoSuchKey"), "read", PAYLOAD, b"call-7", SOURCE)
    headers = [(REDRIVE_ATTEMPT, b"2"), (REPLAY_GENERATION, b"3"), ("callqa-cum-calls", b"40")]
    (record,) = plan_redacted(dead, received(headers), Writer(group=GROUP))
    letter = record.letter
    assert letter is not None and (record.topic, record.key) == ("redact.dlq", b"call-7")
    assert (letter.stage, letter.reason, letter.source) == ("redact", "missing_object", SOURCE)
    assert (letter.attempts, letter.group, letter.headers) == (3, GROUP, {REPLAY_GENERATION: "3"})
    assert decode(record.value, DeadLetter) == letter and letter.original_payload == PAYLOAD


def test_an_event_over_its_topic_limit_is_an_output_too_large_letter_that_keeps_the_transcript() -> None:
    p = plan(transcript(REF, [CARD] * 40), TARGET)
    assert isinstance(p, Redact)
    event = event_of(p)
    limit = len(encode(event)) + FRAMING_BYTES  # one byte short of the event with its key
    writer = Writer(MessageLimits({"audio.redacted": limit}), GROUP, topic_name=lambda t: f"site-a.{t}")
    (record,) = plan_redacted(event, received(), writer)
    letter = record.letter
    assert letter is not None and record.topic == "redact.dlq"
    assert (letter.stage, letter.reason) == ("redact", "output_too_large")
    assert "site-a.audio.redacted" in letter.message  # the physical topic it did not fit
    assert letter.original_payload == PAYLOAD and letter.group == GROUP
    # one byte more room and it fits
    roomy = Writer(MessageLimits({"audio.redacted": limit + len(b"call-7")}), GROUP)
    assert plan_redacted(event, received(), roomy)[0].topic == "audio.redacted"


def test_a_letter_is_cut_to_fit_redact_dlq() -> None:
    big = encode(transcript(REF, [CARD])) + b" " * 50_000
    dead = letter_for(MissingObject("gone"), "read", big, b"call-7", SOURCE)
    limit = 20_000
    writer = Writer(MessageLimits({"redact.dlq": limit}), GROUP)
    (record,) = plan_redacted(dead, Received(big, b"call-7", SOURCE), writer)
    assert record.letter is not None and record.letter.truncated
    assert record.letter.original_payload_bytes == len(big)
    assert len(record.value) + len(b"call-7") + FRAMING_BYTES <= limit


class OutageOnWrite(FileStore):
    """Local files read as they are; every write meets a storage outage (HTTP 503, transient)."""

    def __init__(self) -> None:
        self.puts = 0

    def put(
        self, bucket: str, key: str, data: bytes, content_type: str, metadata: dict[str, str] | None = None
    ) -> ObjectInfo:
        self.puts += 1
        raise StorageError(f"{bucket}/{key}: HTTP 503")


def step(store: FileStore) -> TranscriptRedaction:
    clock = iter(float(t) for t in range(1000))
    retrying = RetryingStore(store, Backoff(deadline_s=30.0), sleep=lambda s: None, clock=lambda: next(clock))
    redactor = Redactor(retrying, TARGET, "silence", 1 << 30)
    return TranscriptRedaction(redactor, Writer(MessageLimits({}), GROUP), "redact.retry")


def stereo_call(path: Path) -> ObjectRef:
    tone = (0.2 * np.sin(np.linspace(0, 3000, 16000))).astype(np.float32)
    sf.write(path, np.stack([tone, tone], axis=1), 8000, subtype="PCM_16")
    return FileStore.ref_for(path)


def test_the_step_passes_over_a_redrive_for_another_group_and_takes_its_own() -> None:
    s = step(FileStore())
    assert s.wanted("asr.transcripts", [])
    assert not s.wanted("redact.retry", [(RETRY_GROUP, b"redact-replay-r2")])
    assert not s.wanted("redact.retry", [])
    assert s.wanted("redact.retry", [(RETRY_GROUP, GROUP.encode())])


def test_the_step_dead_letters_a_missing_original_and_a_write_outage_past_its_deadline(tmp_path: Path) -> None:
    gone = FileStore.ref_for(tmp_path / "gone.wav")
    (record,) = step(FileStore()).handle(Received(encode(transcript(gone, [CARD])), b"call-7", SOURCE))
    assert record.topic == "redact.dlq" and record.letter is not None
    assert record.letter.reason == "missing_object"

    store = OutageOnWrite()
    payload = encode(transcript(stereo_call(tmp_path / "call.wav"), [CARD]))
    (record,) = step(store).handle(Received(payload, b"call-7", SOURCE))
    assert record.topic == "redact.dlq" and record.letter is not None
    assert record.letter.reason == "write_failed" and "storage unavailable" in record.letter.message
    assert store.puts > 1  # retried until the deadline, then one letter (as the router and worker do)
    assert record.letter.original_payload == payload


def test_the_step_writes_nothing_for_a_transcript_without_pii_and_a_letter_for_a_malformed_one() -> None:
    s = step(FileStore())
    assert s.handle(Received(encode(transcript(REF, [])), b"call-7", SOURCE)) == []
    (record,) = s.handle(Received(b"{not json", b"k", SOURCE))
    assert record.topic == "redact.dlq" and record.letter is not None
    assert (record.letter.reason, record.key) == ("malformed_transcript", b"k")
