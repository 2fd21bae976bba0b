"""The QA stage as a plain object: one transcript in, ``Evaluated | Dead`` out, never an exception.

Shared by the Faust QA stage and the embedded runner, so a transcript the rule engine
cannot handle costs that one call only (Faust would otherwise ack and skip the input),
and both modes give it the same reason code. Also the one converter between the rule
engine's :class:`~pipeline.qa.CallQAResult` and the ``qa.findings`` event. Pure: no Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import DecodeError
from pipeline.events import (
    DeadLetter,
    QAResult,
    ReasonCode,
    SourcePosition,
    Transcript,
    decode,
)
from pipeline.lineage import extended, replay_id_of
from pipeline.qa import CallQAResult, CallTextError, QAEngine
from pipeline.stages.outcomes import Dead


def to_event(result: CallQAResult) -> QAResult:
    return QAResult(**result.to_dict())


def from_event(event: QAResult) -> CallQAResult:
    return CallQAResult.from_dict(event.model_dump())


@dataclass(frozen=True)
class Evaluated:
    result: QAResult


QaOutcome = Evaluated | Dead[None]


@dataclass(frozen=True)
class QaStage:
    engine: QAEngine

    def evaluate_payload(
        self,
        payload: bytes,
        key: bytes | None,
        source: SourcePosition | None = None,
        replay_id: str | None = None,
    ) -> QaOutcome:
        """Decode a transcript event and evaluate it. ``replay_id`` (a QA replay) is added to the
        transcript's own lineage (see :mod:`pipeline.lineage`), never put in its place."""
        try:
            transcript = decode(payload, Transcript)
        except DecodeError as exc:
            return _dead("malformed_transcript", str(exc), payload, key, source)
        return self.evaluate(transcript, payload, key, source, replay_id)

    def evaluate(
        self,
        transcript: Transcript,
        payload: bytes,
        key: bytes | None,
        source: SourcePosition | None = None,
        replay_id: str | None = None,
    ) -> QaOutcome:
        """``payload`` is the transcript as it arrived: a dead letter keeps it for a replay."""
        try:
            event = to_event(self.engine.evaluate(transcript))
            # a redacted transcript's masked numbers count too (the engine reads its pii spans)
            lineage = extended(transcript.replay_lineage, replay_id)
            return Evaluated(event.model_copy(update={"replay_id": replay_id_of(lineage), "replay_lineage": lineage}))
        except CallTextError as exc:
            return _dead("malformed_transcript", str(exc), payload, key, source)
        except Exception as exc:  # noqa: BLE001 - a bug or text the engine cannot handle: this call only
            # Only the type: an exception's text may quote the transcript, and letters are logged.
            return _dead("internal_error", f"QA evaluation failed: {type(exc).__name__}", payload, key, source)


def _dead(
    reason: ReasonCode, message: str, payload: bytes, key: bytes | None, source: SourcePosition | None
) -> Dead[None]:
    return Dead(DeadLetter.of(payload=payload, key=key, reason=reason, message=message, stage="qa", source=source))
