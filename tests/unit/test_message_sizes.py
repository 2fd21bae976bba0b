"""Message sizes: producer limits come from the catalog; an output no topic can take is a dead letter."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer, TopicPartition

from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import DeadLetter, ModelInfo, Segment, Transcript, decode, encode
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.stages.redaction import redact_transcript
from pipeline.stages.sizes import FRAMING_BYTES, MessageLimits
from tests.unit.test_worker_commit import TOPIC, FakeConsumer, FakeFetcher, FakeMessage, routed

BUCKETS = ("short", "medium", "long", "xlong")


def big_transcript(call_id: str, size_bytes: int) -> Transcript:
    call = routed(call_id)
    text = "word " * (size_bytes // 5)
    return Transcript(call_id=call_id, object=call.object, duration_s=3.0, channels=1,
                      segments=[Segment(role="mixed", channel=0, start_s=0.0, end_s=3.0, text=text)],
                      model=ModelInfo(name="m", version="1"))


@dataclass
class SizeCheckingProducer:
    """A transaction recorder whose produce() goes through a real librdkafka producer with the
    worker's own settings first, so librdkafka's size check (MSG_SIZE_TOO_LARGE) applies."""

    config: dict
    produced: list[tuple[str, bytes]] = field(default_factory=list)
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
        self.produced.append((topic, value))

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: object, timeout: float) -> None:
        self.offsets += [(tp.partition, tp.offset) for tp in offsets]

    def commit_transaction(self, timeout: float) -> None:
        pass


@pytest.fixture
def worker() -> AsrWorker:
    w = AsrWorker(Settings(), WorkerOptions(bucket="short", window_ms=1, max_calls=4), engine=None)  # type: ignore[arg-type]
    w.fetcher.close()
    w.fetcher = FakeFetcher()  # type: ignore[assignment]
    w.consumer, w.producer = FakeConsumer(), SizeCheckingProducer(w.producer_config())  # type: ignore[assignment]
    yield w
    w.prepare_pool.shutdown()
    w.compute.shutdown()


def commit(worker: AsrWorker, transcripts: list[Transcript]) -> bool:
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0)])
    worker.consumer.queue += [FakeMessage(0, i, encode(routed(t.call_id))) for i, t in enumerate(transcripts)]
    batch = worker._prefetch().result()
    return worker._commit(batch, transcripts)


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
    t = big_transcript("long-call", 1_200_000)
    assert commit(worker, [t])
    assert [(topic, len(value)) for topic, value in worker.producer.produced] == [
        (worker.output_topic, len(encode(redact_transcript(t))))]
    assert worker.producer.offsets == [(0, 1)]


def test_a_transcript_over_the_topic_limit_is_dead_lettered_not_retried(worker: AsrWorker) -> None:
    huge, small = big_transcript("huge", 9 * 2**20), big_transcript("small", 1000)
    assert commit(worker, [huge, small])  # committed: no abort, no rewind, no loop
    topics = [topic for topic, _ in worker.producer.produced]
    assert topics == [worker.output_topic, worker.dlq_topic]
    letter = decode(worker.producer.produced[1][1], DeadLetter)
    assert (letter.reason, letter.stage, letter.source.offset) == ("output_too_large", "asr", 0)
    assert decode(base64.b64decode(letter.original_payload_b64), type(routed("x"))).call_id == "huge"
    assert worker.producer.offsets == [(0, 2)]
