"""Dead-letter selection, the redrive plan and payload decoding (pure)."""

from datetime import UTC, datetime, timedelta

from pipeline.events import DeadLetter, SourcePosition
from pipeline.headers import REDRIVE_ATTEMPT, REPLAY_GENERATION, RETRY_GROUP, addressed_elsewhere, addressed_to
from pipeline.ops.dlq import Selection, StoredLetter, decoded_payload, failing_group, plan_redrive
from pipeline.stages.outputs import stamped

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


def test_redrive_goes_to_the_retry_partition_of_the_arrival_with_the_attempt_count_and_parks_at_the_maximum() -> None:
    actions = plan_redrive([stored(0), stored(1, attempts=3), stored(2, source=False)], Selection(), max_attempts=3)
    redrive, park, skip = actions
    assert (redrive.kind, redrive.topic, redrive.partition) == ("redrive", "router.retry", 3)
    assert redrive.headers == [(REDRIVE_ATTEMPT, b"1"), (RETRY_GROUP, b"callqa-router")]  # a 1.1 letter: default
    assert park.kind == "park" and skip.kind == "skip"


def test_a_letter_keeps_the_processing_headers_and_who_failed_it_and_a_redrive_sends_them_back() -> None:
    headers = [(REPLAY_GENERATION, b"2"), (REDRIVE_ATTEMPT, b"1"), ("callqa-cum-calls", b"9"), ("other", b"x")]
    letter = stamped(stored(0).letter, headers, "router-7")
    assert (letter.attempts, letter.headers, letter.group) == (2, {REPLAY_GENERATION: "2"}, "router-7")
    (action,) = plan_redrive([StoredLetter("router.dlq", 0, 0, letter)], Selection(), max_attempts=3)
    assert action.headers == [(REPLAY_GENERATION, b"2"), (REDRIVE_ATTEMPT, b"2"), (RETRY_GROUP, b"router-7")]
    assert addressed_to(action.headers, "router-7") and not addressed_to(action.headers, "callqa-router")


def test_a_replay_groups_letter_goes_back_to_that_group_alone() -> None:
    base = DeadLetter.of(payload=b"{}", key=b"c1", reason="malformed_transcript", message="m", stage="qa",
                         source=SourcePosition(topic="t.asr.transcripts", partition=4, offset=9))
    letter = stamped(base, None, "qa-replay-1", replay_id="r1")
    (action,) = plan_redrive([StoredLetter("qa.dlq", 0, 0, letter)], Selection(), max_attempts=3)
    assert (action.topic, action.partition) == ("qa.retry", None)  # never asr.transcripts: readers would see it twice
    assert addressed_to(action.headers, "qa-replay-1") and not addressed_to(action.headers, "callqa-qa")
    assert letter.replay_id == "r1"


def test_a_letter_of_schema_1_1_goes_to_its_stages_default_group() -> None:
    asr = DeadLetter.of(payload=b"{}", key=b"c1", reason="fetch_failed", message="m", stage="asr",
                        source=SourcePosition(topic="p.audio.bucket.long", partition=0, offset=1))
    assert failing_group(asr, "p.") == "p.asr-long"
    assert failing_group(asr.model_copy(update={"stage": "qa"})) == "callqa-qa"


def test_a_truncated_letter_is_not_redriven_and_says_where_its_input_is() -> None:
    letter = stored(0).letter.model_copy(update={"truncated": True, "original_payload_bytes": 900_000})
    (action,) = plan_redrive([StoredLetter("router.dlq", 0, 0, letter)], Selection(), max_attempts=3)
    assert action.kind == "skip" and "audio.arrivals[3]@7" in action.why


def test_payload_is_decoded_for_display() -> None:
    assert decoded_payload(stored(0).letter) == {"x": 1}
    binary = DeadLetter.of(payload=b"\xff\x00", key=None, reason="malformed_event", message="m", stage="router")
    assert decoded_payload(binary) == {"base64": "/wA=", "bytes": 2}


def test_an_asr_letter_goes_back_to_its_bucket_partition_for_the_group_that_failed_it() -> None:
    base = DeadLetter.of(payload=b"{}", key=b"c1", reason="fetch_failed", message="m", stage="asr",
                         source=SourcePosition(topic="p.audio.bucket.long", partition=2, offset=5))
    letter = stamped(base, None, "p.asr-long-r2", replay_id="r2")
    (action,) = plan_redrive([StoredLetter("asr.dlq", 0, 0, letter)], Selection(), max_attempts=3, topic_prefix="p.")
    # one input topic per worker: subscribed to a second one, the cooperative assignor could hand a
    # worker all of one topic's partitions, and it would idle beside a busy peer
    assert (action.topic, action.partition) == ("audio.bucket.long", 2)
    assert addressed_elsewhere(action.headers, "p.asr-long") and not addressed_elsewhere(action.headers, "p.asr-long-r2")
    assert not addressed_elsewhere([], "p.asr-long")  # a routed call of the night: every group takes it
