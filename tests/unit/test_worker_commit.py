"""The worker's commit step with fake Kafka clients: stale batches are dropped, offsets never go back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from pipeline.config import Settings
from pipeline.events import ModelInfo, ObjectRef, RoutedCall, Transcript, encode
from pipeline.adapters.fetch import Ready
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.stages.redaction import redact_transcript

TOPIC = "audio.bucket.short"


@dataclass
class FakeMessage:
    _partition: int
    _offset: int
    _value: bytes
    _topic: str = TOPIC

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> None:  # as confluent-kafka's Message without headers
        return None

    def error(self) -> None:
        return None


@dataclass
class FakeConsumer:
    queue: list[FakeMessage] = field(default_factory=list)
    paused: set[tuple[str, int]] = field(default_factory=set)  # kept across revokes, as librdkafka does

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused |= {(p.topic, p.partition) for p in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused -= {(p.topic, p.partition) for p in partitions}

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        taken, self.queue = self.queue[:num_messages], self.queue[num_messages:]
        return taken

    def consumer_group_metadata(self) -> str:
        return "group-metadata"

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, 100


@dataclass
class FakeProducer:
    produced: list[tuple[str, bytes]] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)
    commits: int = 0

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        self.produced.append((topic, value))

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: Any, timeout: float) -> None:
        self.offsets += [(tp.partition, tp.offset) for tp in offsets]

    def commit_transaction(self, timeout: float) -> None:
        self.commits += 1


class FakeFetcher:
    """Every call is ready at once (no storage, no audio: the engine is not run here)."""

    def fetch_one(self, tag, call, payload, source) -> Ready:  # noqa: ANN001
        return Ready(tag, call, None, 0.0)  # type: ignore[arg-type]

    def fetch_all(self, items: list) -> list[Ready]:
        return [self.fetch_one(*item) for item in items]


def routed(call_id: str) -> RoutedCall:
    return RoutedCall(call_id=call_id, object=ObjectRef(bucket="b", key=f"{call_id}.wav"), bucket="short",
                      duration_s=3.0, sample_rate_hz=8000, channels=1, frames=24000, container="WAV",
                      codec="PCM_16", roles={"0": "mixed"})


def transcript(call: RoutedCall) -> Transcript:
    return Transcript(call_id=call.call_id, object=call.object, duration_s=call.duration_s, channels=1,
                      segments=[], model=ModelInfo(name="m", version="1"))


@pytest.fixture
def worker() -> AsrWorker:
    w = AsrWorker(Settings(), WorkerOptions(bucket="short", window_ms=1, max_calls=4), engine=None)  # type: ignore[arg-type]
    w.fetcher.close()
    w.fetcher = FakeFetcher()  # type: ignore[assignment]
    w.consumer, w.producer = FakeConsumer(), FakeProducer()  # type: ignore[assignment]
    yield w
    w.prepare_pool.shutdown()
    w.compute.shutdown()


def fetch(worker: AsrWorker, *positions: tuple[int, int]):
    """Deliver messages at (partition, offset), gather them into one batch, prepare it."""
    calls = [routed(f"c{p}-{o}") for p, o in positions]
    worker.consumer.queue += [FakeMessage(p, o, encode(c)) for (p, o), c in zip(positions, calls)]
    batch = worker._prefetch().result()
    return batch, [transcript(c) for c in calls]


def test_a_batch_revoked_and_reassigned_before_commit_is_dropped(worker: AsrWorker) -> None:
    tp0 = [TopicPartition(TOPIC, 0)]
    worker._on_assign(worker.consumer, tp0)
    batch, transcripts = fetch(worker, (0, 5), (0, 6))
    worker._on_revoke(worker.consumer, tp0)  # another member may process offsets 5-6 meanwhile
    worker._on_assign(worker.consumer, tp0)  # ... and the partition comes back before our commit
    assert worker._commit(batch, transcripts)
    assert worker.producer.produced == [] and worker.producer.offsets == []


def test_only_the_revoked_partition_of_a_batch_is_dropped(worker: AsrWorker) -> None:
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    batch, transcripts = fetch(worker, (0, 5), (1, 9))
    worker._on_revoke(worker.consumer, [TopicPartition(TOPIC, 1)])
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 1)])
    assert worker._commit(batch, transcripts)
    assert worker.producer.offsets == [(0, 6)]
    assert [v for _, v in worker.producer.produced] == [encode(redact_transcript(transcripts[0]))]


def test_a_commit_never_moves_an_offset_backwards(worker: AsrWorker) -> None:
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0)])
    batch, transcripts = fetch(worker, (0, 5), (0, 6))
    assert worker._commit(batch, transcripts)
    assert worker.producer.offsets == [(0, 7)]
    # A message below what is committed (a late re-delivery) is neither produced nor committed again.
    batch, transcripts = fetch(worker, (0, 3))
    assert worker._commit(batch, transcripts)
    assert worker.producer.offsets == [(0, 7)] and len(worker.producer.produced) == 2


def test_a_partition_revoked_while_paused_is_fetched_again_when_it_comes_back(worker: AsrWorker) -> None:
    tp0 = [TopicPartition(TOPIC, 0)]
    worker._on_assign(worker.consumer, tp0)
    worker.consumer.pause(tp0)  # a batch computes
    worker._on_revoke(worker.consumer, tp0)  # the partition leaves meanwhile: the resume skips it
    worker._on_assign(worker.consumer, tp0)  # a member died, the partition is back
    assert worker.consumer.paused == set()


def test_two_messages_of_one_call_id_in_a_batch_each_get_their_transcript(worker: AsrWorker) -> None:
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, 0)])
    a, b = routed("call"), routed("call").model_copy(update={"object": ObjectRef(bucket="b", key="other/call.wav")})
    worker.consumer.queue += [FakeMessage(0, 0, encode(a)), FakeMessage(0, 1, encode(b))]
    batch = worker._prefetch().result()
    transcripts = [transcript(a), transcript(b)]
    assert worker._commit(batch, transcripts)
    assert [v for _, v in worker.producer.produced] == [encode(redact_transcript(t)) for t in transcripts]


def test_a_rewind_survives_a_broker_that_is_still_down(worker: AsrWorker) -> None:
    from confluent_kafka import KafkaError, KafkaException

    calls = {"committed": 0}
    seeks: list[tuple[int, int]] = []

    def committed(partitions, timeout):  # noqa: ANN001, ANN202 - down for the first two tries
        calls["committed"] += 1
        if calls["committed"] <= 2:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
        return [TopicPartition(TOPIC, 0, 7)]

    worker.consumer.assignment = lambda: [TopicPartition(TOPIC, 0)]  # type: ignore[attr-defined]
    worker.consumer.committed = committed  # type: ignore[attr-defined]
    worker.consumer.seek = lambda tp: seeks.append((tp.partition, tp.offset))  # type: ignore[attr-defined]
    worker.producer.abort_transaction = lambda timeout: None  # type: ignore[attr-defined]
    worker._recover(KafkaException(KafkaError(KafkaError._TRANSPORT, "commit failed", txn_requires_abort=True)))
    assert seeks == [(0, 7)] and calls["committed"] == 3
