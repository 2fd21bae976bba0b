"""Message sizes: producer limits come from the catalog; an output no topic can take is a dead letter."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
import pytest
from confluent_kafka import Producer, TopicPartition

from pipeline.catalog import load_catalog
from pipeline.events import DeadLetter, SourcePosition, Transcript, decode, encode
from pipeline.run.worker import AsrWorker
from pipeline.stages.sizes import FRAMING_BYTES, MessageLimits, fitting_letter
from tests.fakes import TOPIC, FakeEngine, FakeMessage, fake_worker, routed

BUCKETS = ("short", "medium", "long", "xlong")


def words(size_bytes: int) -> str:
    return "word " * (size_bytes // 5)


@dataclass
class SizeCheckingProducer:
    """A transaction recorder whose produce() goes through a real librdkafka producer with the
    worker's own settings first, so librdkafka's size check (MSG_SIZE_TOO_LARGE) applies."""

    config: dict
    produced: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        settings = {k: v for k, v in self.config.items() if not k.startswith("transaction")}
        self.real = Producer({**settings, "bootstrap.servers": "127.0.0.1:1"})

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        self.real.produce(topic, key=key, value=value)  # raises KafkaException when over message.max.bytes
        self.real.purge()
        self.real.flush(0)
        self.produced.append((topic, key, value))

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: object, timeout: float) -> None:
        self.offsets += [(tp.partition, tp.offset) for tp in offsets]

    def commit_transaction(self, timeout: float) -> None:
        pass


@pytest.fixture
def worker() -> Iterator[AsrWorker]:
    yield from fake_worker(lambda w: SizeCheckingProducer(w.producer_config()))


def commit(worker: AsrWorker, texts: dict[str, str]) -> bool:
    """One batch of calls whose transcripts say ``texts`` (call id -> text), committed."""
    worker.stage.engine = FakeEngine(texts=texts)
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0)])
    worker.consumer.queue += [FakeMessage(TOPIC, 0, i, encode(routed(c))) for i, c in enumerate(texts)]
    inflight = worker._prefetch().result()
    return worker._commit(inflight, worker._transcribe(inflight.prepared))


def test_producer_limits_come_from_the_catalog() -> None:
    limits = MessageLimits.from_catalog(load_catalog(BUCKETS))
    assert limits.limit("asr.transcripts") == 8 * 2**20
    assert limits.limit("audio.arrivals") == 1048588  # the broker default where the catalog sets none
    assert limits.producer_max_bytes(["qa.findings", "qa.dlq"]) == limits.limit("qa.dlq")


def test_every_dead_letter_topic_takes_a_letter_carrying_its_largest_input() -> None:
    limits = MessageLimits.from_catalog(load_catalog(BUCKETS))
    for dlq, inputs in {"router.dlq": ["audio.arrivals"], "asr.dlq": [f"audio.bucket.{b}" for b in BUCKETS],
                        "qa.dlq": ["asr.transcripts"]}.items():
        for source in inputs:
            biggest = limits.limit(source) - FRAMING_BYTES
            letter = DeadLetter.of(payload=b"x" * biggest, key=b"k" * 200, reason="output_too_large",
                                   stage="qa", message="m" * 300)
            assert limits.fits(dlq, b"k" * 200, encode(letter)), (dlq, source)


def test_a_transcript_over_one_megabyte_is_published(worker: AsrWorker) -> None:
    assert commit(worker, {"long-call": words(1_200_000)})
    [(topic, _, value)] = worker.committer.producer.produced
    assert topic == worker.output_topic and len(value) > 1_200_000
    assert decode(value, Transcript).redacted
    assert worker.committer.producer.offsets == [(0, 1)]


def test_a_transcript_over_the_topic_limit_is_dead_lettered_not_retried(worker: AsrWorker) -> None:
    assert commit(worker, {"huge": words(9 * 2**20), "small": words(1000)})  # committed: no abort, no rewind
    produced = worker.committer.producer.produced
    assert [topic for topic, _, _ in produced] == [worker.output_topic, worker.dlq_topic]
    letter = decode(produced[1][2], DeadLetter)
    assert (letter.reason, letter.stage, letter.source.offset) == ("output_too_large", "asr", 0)
    assert decode(base64.b64decode(letter.original_payload_b64), type(routed("x"))).call_id == "huge"
    assert worker.committer.producer.offsets == [(0, 2)]


def huge_error_letter(payload_bytes: int, message_chars: int, message_char: str = "m") -> DeadLetter:
    return DeadLetter.of(payload=b"p" * payload_bytes, key=b"rec/a.wav", reason="malformed_event", stage="router",
                         message=message_char * message_chars,
                         source=SourcePosition(topic="audio.arrivals", partition=2, offset=41))


def test_a_letter_that_fits_is_sent_as_it_is() -> None:
    letter = huge_error_letter(1000, 100)
    assert fitting_letter(letter, b"rec/a.wav", 2 * 2**20) == letter


@pytest.mark.parametrize("message_char", ["m", "\x00", "录"])  # escapes and UTF-8 count as sent
@pytest.mark.parametrize("payload_bytes", [1_000_000, 3_000_000])
def test_a_letter_over_its_topic_is_cut_to_fit_and_says_where_the_input_is(message_char: str,
                                                                            payload_bytes: int) -> None:
    limit = MessageLimits.from_catalog(load_catalog(BUCKETS)).limit("router.dlq")
    letter = huge_error_letter(payload_bytes, 12_000_000, message_char)
    assert len(encode(letter)) > limit
    cut = fitting_letter(letter, b"rec/a.wav", limit)
    value = encode(cut)
    assert len(value) + len(b"rec/a.wav") + FRAMING_BYTES <= limit
    assert cut.truncated and cut.original_payload_bytes == payload_bytes
    assert letter.original_payload.startswith(cut.original_payload)
    if payload_bytes * 4 / 3 < limit - 64 * 1024:
        assert cut.original_payload == letter.original_payload  # only the message had to go
    else:
        assert len(value) > limit - 64 * 1024  # what the limit allows is used, not thrown away
    assert cut.message.startswith(message_char * 100) and cut.message.endswith("(12000000 characters in all)")
    assert (cut.source, cut.reason, cut.stage, cut.original_key) == (letter.source, "malformed_event", "router",
                                                                     "rec/a.wav")
    assert decode(value, DeadLetter, strict=True) == cut


def test_a_letter_whose_message_alone_is_over_the_limit_keeps_the_messages_head() -> None:
    cut = fitting_letter(huge_error_letter(10, 3_000_000), b"k", 2 * 2**20)
    assert cut.truncated and len(cut.message) < 5000 and cut.original_payload == b"p" * 10


def test_a_worker_letter_over_asr_dlq_is_cut_to_fit(worker: AsrWorker) -> None:
    """A RoutedCall under 1 MiB whose 64,000 metadata values are not strings: megabytes of error."""
    call = orjson.loads(encode(routed("meta")))
    call["metadata"] = {str(i): i for i in range(64_000)}
    payload = orjson.dumps(call)
    assert len(payload) < 2**20
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0)])
    worker.consumer.queue.append(FakeMessage(TOPIC, 0, 0, payload))
    inflight = worker._prefetch().result()
    assert worker._commit(inflight, worker._transcribe(inflight.prepared))
    [(topic, key, value)] = worker.committer.producer.produced
    assert topic == worker.dlq_topic
    assert worker.limits.fits("asr.dlq", key, value)
    letter = decode(value, DeadLetter)
    assert letter.truncated and letter.source.offset == 0 and letter.group == worker.group_id
