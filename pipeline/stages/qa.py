"""The QA step on one transcript: a QAResult, or a DeadLetter with its reason, never an exception.

Shared by the Faust QA stage and the embedded runner, so a transcript the rule engine
cannot handle costs that one call only (Faust would otherwise ack and skip the input),
and both modes give it the same reason code. Pure: no Kafka.
"""

from __future__ import annotations

from pipeline.errors import DecodeError
from pipeline.events import DeadLetter, QAResult, ReasonCode, SourcePosition, Transcript, decode
from pipeline.qa import CallTextError, QAEngine


def evaluate_payload(engine: QAEngine, payload: bytes, key: bytes | None,
                     source: SourcePosition | None = None, replay_id: str | None = None) -> QAResult | DeadLetter:
    """Decode a transcript event and evaluate it. ``replay_id`` tags the result (a QA replay);
    without it the result carries the transcript's own replay id."""
    try:
        transcript = decode(payload, Transcript)
    except DecodeError as exc:
        return _letter("malformed_transcript", str(exc), payload, key, source)
    return evaluate_transcript(engine, transcript, payload, key, source, replay_id)


def evaluate_transcript(engine: QAEngine, transcript: Transcript, payload: bytes, key: bytes | None,
                        source: SourcePosition | None = None, replay_id: str | None = None) -> QAResult | DeadLetter:
    """``payload`` is the transcript as it arrived: a dead letter keeps it for a replay."""
    try:
        result = engine.evaluate(transcript).to_dict()  # a redacted transcript's masked numbers count too
        return QAResult(**result, replay_id=replay_id or transcript.replay_id)
    except CallTextError as exc:
        return _letter("malformed_transcript", str(exc), payload, key, source)
    except Exception as exc:  # noqa: BLE001 - a bug or text the engine cannot handle: this call only
        # Only the type: an exception's text may quote the transcript, and letters are logged.
        return _letter("internal_error", f"QA evaluation failed: {type(exc).__name__}", payload, key, source)


def _letter(reason: ReasonCode, message: str, payload: bytes, key: bytes | None,
            source: SourcePosition | None) -> DeadLetter:
    return DeadLetter.of(payload=payload, key=key, reason=reason, message=message, stage="qa", source=source)
