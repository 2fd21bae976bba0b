"""Message sizes: producer limits come from the catalog; an output no topic can take is a dead letter."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer, TopicPartition

from pipeline.catalog import load_catalog
from pipeline.events import DeadLetter, Transcript, decode, encode
from pipeline.run.worker import AsrWorker
from pipeline.stages.sizes import FRAMING_BYTES, MessageLimits
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
