"""Dead-letter selection, the redrive plan and payload decoding (pure)."""

from datetime import UTC, datetime, timedelta

from pipeline.events import DeadLetter, SourcePosition
from pipeline.ops.dlq import Selection, StoredLetter, decoded_payload, plan_redrive, with_attempts
from pipeline.ops.headers import REDRIVE_ATTEMPT

T0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)


def stored(offset: int, reason: str = "missing_object", key: str = "rec/a.wav", attempts: int = 1,
           minutes: int = 0, handled: str | None = None, source: bool = True) -> StoredLetter:
    letter = DeadLetter.of(payload=b'{"x": 1}', key=key.encode(), reason=reason, message="m", stage="router",
                           attempts=attempts, failed_at=T0 + timedelta(minutes=minutes),
                           source=SourcePosition(topic="audio.arrivals", partition=3, offset=7) if source else None)
    return StoredLetter("router.dlq", 0, offset, letter, handled)


def test_selection_by_reason_key_time_and_id() -> None:
    letters = [stored(0), stored(1, reason="truncated"), stored(2, key="rec/b.wav", minutes=30),
               stored(3, handled="redrive 2026-11-30T23:40")]
    pick = lambda **kw: [s.stored.offset if hasattr(s, "stored") else s.offset  # noqa: E731
                         for s in letters if Selection(**kw).matches(s)]
    assert pick(reasons=frozenset({"missing_object"})) == [0, 2]
    assert pick(key_patterns=("rec/b*",)) == [2]
    assert pick(since=T0 + timedelta(minutes=10)) == [2]
    assert pick(until=T0 + timedelta(minutes=10)) == [0, 1]
    assert pick(ids=frozenset({"router.dlq:0:1"})) == [1]
    assert pick(include_handled=True) == [0, 1, 2, 3]


def test_redrive_goes_back_to_the_source_partition_with_the_attempt_count_and_parks_at_the_maximum() -> None:
    actions = plan_redrive([stored(0), stored(1, attempts=3), stored(2, source=False)], Selection(), max_attempts=3)
    redrive, park, skip = actions
    assert (redrive.kind, redrive.topic, redrive.partition) == ("redrive", "audio.arrivals", 3)
    assert redrive.headers == [(REDRIVE_ATTEMPT, b"1")]
    assert park.kind == "park" and skip.kind == "skip"


def test_a_failed_redrive_counts_one_attempt_more() -> None:
    letter = stored(0).letter
    assert with_attempts(letter, 0).attempts == 1
    assert with_attempts(letter, 2).attempts == 3


def test_payload_is_decoded_for_display() -> None:
    assert decoded_payload(stored(0).letter) == {"x": 1}
    binary = DeadLetter.of(payload=b"\xff\x00", key=None, reason="malformed_event", message="m", stage="router")
    assert decoded_payload(binary) == {"base64": "/wA=", "bytes": 2}
