"""From a stage's outcome to the records to write: one planner per stage, pure (no Kafka).

The Faust router and QA agents, the worker's transaction and the embedded runner's files
write exactly what these return, so both modes treat an outcome the same way: an output
over its topic's limit becomes an ``output_too_large`` letter carrying the small input
(:mod:`pipeline.stages.sizes`), every letter is stamped with its attempt count, the input's
processing headers and the group that failed it, and cut to fit its dead-letter topic.
Topics are catalog names (before any prefix); the embedded runner maps them to its files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.events import AudioRedacted, DeadLetter, SourcePosition, encode
from pipeline.headers import REDRIVE_ATTEMPT, HeadersLike, Stamp, int_header, processing_headers
from pipeline.stages.asr import AsrOutcome, Transcribed
from pipeline.stages.outcomes import Dead
from pipeline.stages.qa import Evaluated, QaOutcome
from pipeline.stages.redacted_copies import NothingToRedact, RedactedOutcome
from pipeline.stages.router import Outcome as RouteOutcome
from pipeline.stages.router import Routed
from pipeline.stages.sizes import MessageLimits, fitting_letter, too_large_letter

Headers = tuple[tuple[str, bytes], ...]
DLQ = {"router": "router.dlq", "asr": "asr.dlq", "qa": "qa.dlq", "redact": "redact.dlq"}
TRANSCRIPTS, RAW_TRANSCRIPTS, FINDINGS, SEEN = "asr.transcripts", "asr.transcripts.raw", "qa.findings", "router.seen"
REDACTED = "audio.redacted"


@dataclass(frozen=True)
class Record:
    """One record to write. ``letter`` is set on a dead letter: the letter as written (cut to fit)."""

    topic: str  # catalog name
    key: bytes | None
    value: bytes
    headers: Headers = ()
    partition: int | None = None  # None: the producer's partitioner
    letter: DeadLetter | None = None


@dataclass(frozen=True)
class Received:
    """The input record an outcome is of: what a dead letter keeps, and where its attempt count comes from."""

    payload: bytes
    key: bytes | None
    source: SourcePosition | None = None
    headers: HeadersLike = None


def stamped(letter: DeadLetter, headers: HeadersLike, group: str | None, replay_id: str | None = None) -> DeadLetter:
    """The letter a stage writes for an input that came with ``headers``: the attempt count
    (``callqa-redrive-attempt`` + 1), the processing headers to send back, who failed it."""
    return letter.model_copy(
        update={
            "attempts": int_header(headers, REDRIVE_ATTEMPT) + 1,
            "headers": processing_headers(headers),
            "group": group,
            "replay_id": replay_id,
        }
    )


@dataclass(frozen=True)
class Writer:
    """Who writes a stage's outputs: the size limits, the group and replay id recorded in its letters
    (None in embedded mode: no group to redrive to), and the physical name of a catalog topic."""

    limits: MessageLimits = field(default_factory=lambda: MessageLimits({}))
    group: str | None = None
    replay_id: str | None = None
    topic_name: Callable[[str], str] = str

    def dead(self, letter: DeadLetter, received: Received) -> Record:
        topic = DLQ[letter.stage]
        letter = stamped(letter, received.headers, self.group, self.replay_id)
        letter = fitting_letter(letter, received.key, self.limits.limit(topic))
        return Record(topic, received.key, encode(letter), letter=letter)

    def fitting(self, stage: str, record: Record, received: Received) -> Record:
        """``record``, or the letter saying it is over its topic's limit (its input kept)."""
        if self.limits.fits(record.topic, record.key, record.value):
            return record
        letter = too_large_letter(
            stage=stage,
            topic=self.topic_name(record.topic),
            size_bytes=len(record.value),
            limit_bytes=self.limits.limit(record.topic),
            payload=received.payload,
            key=received.key,
            source=received.source,
        )
        return self.dead(letter, received)


# (physical bucket topic, partition, audio seconds, lane: the arrivals partition) -> progress stamp
StampOf = Callable[[str, int, float, int | None], Stamp]


def plan_route(
    outcome: RouteOutcome, received: Received, writer: Writer, stamp: StampOf | None = None, routed_at: float = 0.0
) -> list[Record]:
    """A routed call to its bucket topic partition (with its progress stamp) and its de-dup marker
    to ``router.seen`` (same partition number as the arrival); a letter to ``router.dlq``; a skip: nothing."""
    if isinstance(outcome, Dead):
        return [writer.dead(outcome.letter, received)]
    if not isinstance(outcome, Routed):
        return []
    call = outcome.call
    topic = f"audio.bucket.{call.bucket}"
    routed = writer.fitting(
        "router", Record(topic, call.call_id.encode(), encode(call), partition=outcome.partition), received
    )
    if routed.letter is not None:
        return [routed]
    # Stamped only once it is known to be written: the totals count what the partition holds.
    partition = received.source.partition if received.source else None
    headers = (
        tuple(stamp(writer.topic_name(topic), outcome.partition, call.duration_s, partition).to_headers())
        if stamp
        else ()
    )
    marker = Record(SEEN, outcome.dedup_key.encode(), str(routed_at).encode(), partition=partition)
    return [Record(topic, routed.key, routed.value, headers, outcome.partition), marker]


def plan_transcribed(outcome: AsrOutcome[Any], received: Received, writer: Writer, raw: bool = False) -> list[Record]:
    """A transcript (redacted, as encoded on the compute thread) to ``asr.transcripts``, and, where an
    operator turned it on and it fits, its clear-text copy to ``asr.transcripts.raw``; a letter to ``asr.dlq``."""
    if isinstance(outcome, Dead):
        return [writer.dead(outcome.letter, received)]
    assert isinstance(outcome, Transcribed)
    key = outcome.redacted.call_id.encode()
    record = writer.fitting("asr", Record(TRANSCRIPTS, key, outcome.value), received)
    if record.letter is not None or not raw:
        return [record]
    clear = Record(RAW_TRANSCRIPTS, key, encode(outcome.transcript))
    return [record, clear] if writer.limits.fits(clear.topic, clear.key, clear.value) else [record]


def plan_evaluated(outcome: QaOutcome, received: Received, writer: Writer) -> list[Record]:
    """A QA result to ``qa.findings``; a letter to ``qa.dlq``."""
    if isinstance(outcome, Dead):
        return [writer.dead(outcome.letter, received)]
    assert isinstance(outcome, Evaluated)
    result = outcome.result
    return [writer.fitting("qa", Record(FINDINGS, result.call_id.encode(), encode(result)), received)]


def plan_redacted(outcome: RedactedOutcome, received: Received, writer: Writer) -> list[Record]:
    """The event naming a written copy to ``audio.redacted`` (key: call id); a letter to ``redact.dlq``
    (a transient storage failure is one too, once the store's retry deadline has passed, as for the
    router and the worker); a transcript without PII: nothing."""
    if isinstance(outcome, Dead):
        return [writer.dead(outcome.letter, received)]
    if isinstance(outcome, NothingToRedact):
        return []
    assert isinstance(outcome, AudioRedacted)
    return [writer.fitting("redact", Record(REDACTED, outcome.call_id.encode(), encode(outcome)), received)]


def letters(records: Sequence[Record]) -> list[DeadLetter]:
    return [r.letter for r in records if r.letter is not None]
