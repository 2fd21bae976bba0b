"""Small fakes for the unit tests: Kafka clients (the parts the worker uses), a speech engine, and an
ASR worker wired to them (with helpers to assign, revoke and fetch).

Real components run wherever they can; these stand in only where a unit test must run
without a broker or without the model (the engine fake transcribes nothing, it only
reports who it saw and can be told to fail).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import BatchStats, CallTranscript, Segment
from pipeline.events import ObjectRef, RoutedCall, Transcript, decode, encode
from pipeline.stages.asr import AsrInput, Fetched
from pipeline.stages.outcomes import Dead

if TYPE_CHECKING:  # the worker module takes a second to import: only the tests that build one pay
    from pipeline.run.worker import AsrWorker, _InFlight
    from pipeline.stages.asr import AsrBatch

TOPIC = "audio.bucket.short"


@dataclass
class FakeMessage:
    _topic: str
    _partition: int
    _offset: int
    _value: bytes
    _key: bytes | None = b"k"

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

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
    assigned: list[tuple[str, int]] = field(default_factory=list)
    committed_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    seeks: list[tuple[int, int]] = field(default_factory=list)

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused |= {(p.topic, p.partition) for p in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused -= {(p.topic, p.partition) for p in partitions}

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        """Up to ``num_messages`` in order; a paused partition's wait in the queue (librdkafka fetches none)."""
        taken: list[FakeMessage] = []
        kept: list[FakeMessage] = []
        for msg in self.queue:
            delivered = len(taken) < num_messages and not self._is_paused(msg)
            (taken if delivered else kept).append(msg)
        self.queue = kept
        return taken

    def _is_paused(self, msg: FakeMessage) -> bool:
        return isinstance(msg, FakeMessage) and (msg.topic(), msg.partition()) in self.paused

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.assigned]

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [
            TopicPartition(p.topic, p.partition, self.committed_offsets.get((p.topic, p.partition), -1001))
            for p in partitions
        ]

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.partition, tp.offset))

    def consumer_group_metadata(self) -> str:
        return "group-metadata"

    def close(self) -> None:
        self.closed = True

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, 100


@dataclass
class FakeProducer:
    """A transactional producer; ``fail_commit`` makes the next commit raise (abortable, or fatal)."""

    produced: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)
    commits: int = 0
    aborts: int = 0
    fail_commit: str | None = None  # "abortable" | "fatal"
    _open: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)

    def begin_transaction(self) -> None:
        self._open = []

    def produce(self, topic: str, key: bytes | None, value: bytes) -> None:
        self._open.append((topic, key, value))

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: Any, timeout: float) -> None:
        self._pending_offsets = [(tp.partition, tp.offset) for tp in offsets]

    def commit_transaction(self, timeout: float) -> None:
        if self.fail_commit:
            fatal, self.fail_commit = self.fail_commit == "fatal", None
            raise KafkaException(
                KafkaError(
                    KafkaError._FENCED if fatal else KafkaError._TIMED_OUT,
                    "test",
                    fatal=fatal,
                    txn_requires_abort=not fatal,
                )
            )
        self.produced += self._open
        self.offsets += self._pending_offsets
        self.commits += 1

    def abort_transaction(self, timeout: float) -> None:
        self._open = []
        self.aborts += 1

    def close(self) -> bool:
        self.closed = True
        return True


@dataclass
class FakeEngine:
    """Says one segment per channel (``texts[call_id]``, or "words of <call id>"); raises for the
    calls ``fail`` names, in a batch or alone."""

    fail: Callable[[str], bool] = lambda call_id: False
    texts: dict[str, str] = field(default_factory=dict)
    fail_batch: Callable[[Sequence[str]], bool] = lambda call_ids: False
    last_batch_stats: list[BatchStats] = field(default_factory=list)
    batches: list[list[str]] = field(default_factory=list)

    def transcribe_batch(self, calls: Sequence[CallAudio], /) -> list[CallTranscript]:
        ids = [c.call_id for c in calls]
        self.batches.append(ids)
        if self.fail_batch(ids) or any(self.fail(i) for i in ids):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.last_batch_stats = [_stats(calls)]
        return [self._say(c, self.texts) for c in calls]

    def transcribe(self, call: CallAudio, /) -> CallTranscript:
        if self.fail(call.call_id):
            raise RuntimeError(f"engine failed on {call.call_id}")
        self.last_batch_stats = [_stats([call])]
        return self._say(call, self.texts)

    @staticmethod
    def _say(call: CallAudio, texts: dict[str, str]) -> CallTranscript:
        duration_s = call.samples.shape[1] / call.sample_rate
        text = texts.get(call.call_id, f"words of {call.call_id}")
        segments = [
            Segment(role=role, channel=ch, start_s=0.0, end_s=duration_s, text=text)
            for ch, role in enumerate(call.roles)
        ]
        return CallTranscript(
            call.call_id, segments, {ch: "en" for ch in range(len(call.roles))}, "fake", "1", {"asr_s": 0.0}, duration_s
        )


def _stats(calls: Sequence[CallAudio]) -> BatchStats:
    audio_s = sum(c.samples.shape[1] / c.sample_rate for c in calls)
    return BatchStats(
        items=len(calls),
        bucket_s=30.0,
        audio_s=audio_s,
        speech_s=audio_s,
        computed_s=30.0 * len(calls),
        encode_s=0.0,
    )


@dataclass
class FakeClock:
    """A monotonic clock that moves only when a test moves it (``t``)."""

    t: float = 100.0

    def __call__(self) -> float:
        return self.t


class FencedMessage:
    """What confluent-kafka delivers when the broker fenced this static member (after a broker restart):
    code _FATAL, with the fatal flag unset."""

    def error(self) -> KafkaError:
        return KafkaError(
            KafkaError._FATAL, "static consumer fenced by other consumer with same group.instance.id", fatal=False
        )


class FakeFetcher:
    """Every call is ready at once: one second of silence (no storage here)."""

    def fetch(self, inputs: Sequence[AsrInput[FakeMessage]]) -> list[Fetched[FakeMessage] | Dead[FakeMessage]]:
        return [
            Fetched(i, i.call, CallAudio(i.call.call_id, np.zeros((1, 8000), np.float32), 8000, ("mixed",)), 0.0)
            for i in inputs
            if i.call is not None
        ]

    def close(self) -> None:
        pass


def routed(call_id: str, duration_s: float = 3.0) -> RoutedCall:
    return RoutedCall(
        call_id=call_id,
        object=ObjectRef(bucket="b", key=f"{call_id}.wav"),
        bucket="short",
        duration_s=duration_s,
        sample_rate_hz=8000,
        channels=1,
        frames=int(duration_s * 8000),
        container="WAV",
        codec="PCM_16",
        roles={"0": "mixed"},
    )


def fake_worker(new_producer: Callable[[AsrWorker], Any] = lambda w: FakeProducer()) -> Iterator[AsrWorker]:
    """A short-bucket worker on the fake consumer, fetcher and engine; ``new_producer`` makes its
    transactional producers. A generator, for a fixture to yield from."""
    from pipeline.config import Settings
    from pipeline.run.worker import AsrWorker, WorkerOptions

    w = AsrWorker(Settings(), WorkerOptions(bucket="short", window_ms=1, max_calls=4), engine=FakeEngine())
    w.fetcher.close()
    w.stage.fetcher = FakeFetcher()
    w.consumer = FakeConsumer()
    w.committer = w._committer(w.consumer, lambda: new_producer(w))
    yield w
    w.prepare_pool.shutdown()
    w.compute.shutdown()


def assign(worker: AsrWorker, *partitions: int) -> None:
    worker.consumer.assigned += [(TOPIC, p) for p in partitions]
    worker._on_assign(worker.consumer, [TopicPartition(TOPIC, p) for p in partitions])


def revoke(worker: AsrWorker, *partitions: int) -> None:
    worker.consumer.assigned = [tp for tp in worker.consumer.assigned if tp[1] not in partitions]
    worker._on_revoke(worker.consumer, [TopicPartition(TOPIC, p) for p in partitions])


def fetch(worker: AsrWorker, *positions: tuple[int, int]) -> tuple[_InFlight, AsrBatch[FakeMessage]]:
    """Deliver messages at (partition, offset), gather them into one batch, prepare and transcribe it."""
    worker.consumer.queue += [FakeMessage(TOPIC, p, o, encode(routed(f"c{p}-{o}"))) for p, o in positions]
    inflight = worker._prefetch().result()
    return inflight, worker._transcribe(inflight.prepared)


def produced(worker: AsrWorker) -> list[str]:
    """The call ids of the transcripts the worker's producer committed."""
    return [decode(v, Transcript).call_id for t, _, v in worker.committer.producer.produced if t == worker.output_topic]
