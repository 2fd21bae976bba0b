"""ASR worker: a confluent-kafka consumer group per duration bucket, exactly once.

One process per accelerator, in group ``asr-<bucket>``. The loop:

1. gather RoutedCalls for at most ``window_ms`` or until the batch budget is full;
2. fetch + decode their audio concurrently, while the engine computes the previous batch;
3. transcribe the batch, then in one transaction produce every Transcript (and the
   dead letters of calls that failed) and commit the batch's input offsets.

While the engine computes, the consumer is paused and keeps polling, so heartbeats and
``max.poll.interval.ms`` hold during long batches. An abortable transaction error aborts
and rewinds to the committed offsets; nothing is produced twice or lost. A batch from a
partition revoked after its fetch is dropped even if the partition came back (see
:mod:`pipeline.stages.checkpoint`), and committed offsets never move backwards.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from pipeline.asr import Engine
from pipeline.catalog import load_catalog
from pipeline.stages.batching import BatchBudget, pack_in_order
from pipeline.stages.checkpoint import Checkpoint, Position
from pipeline.config import Settings
from pipeline.errors import DecodeError
from pipeline.events import DeadLetter, RoutedCall, SourcePosition, Transcript, decode, encode
from pipeline.adapters.fetch import Failed, Fetcher, Ready
from pipeline.logs import get_logger
from pipeline.ops.dlq import with_attempts
from pipeline.ops.headers import REDRIVE_ATTEMPT, int_header
from pipeline.ops.health import StageHealth
from pipeline.adapters.storage import MinioStore, storage_client
from pipeline.stages.redaction import redact_transcript
from pipeline.stages.sizes import MessageLimits, too_large_letter
from pipeline.stages.transcript_event import to_transcript
from pipeline.run.worker_metrics import WorkerMetrics

log = get_logger("callqa.worker")


@dataclass(frozen=True)
class WorkerOptions:
    bucket: str
    device: str = "cpu"
    instance_id: str | None = None  # static membership id; default host + device + bucket
    window_ms: int = 50
    max_calls: int = 16
    max_audio_s: float = 1800.0
    fetch_threads: int = 4
    session_timeout_ms: int = 15000
    transaction_timeout_ms: int = 300000
    # Backpressure: no prefetch (one batch in flight, not two) while device memory is above this.
    memory_watermark_bytes: int | None = None
    group: str | None = None  # consumer group; default asr-<bucket> (another one replays the bucket)
    replay_id: str | None = None  # carried by every transcript of a replay

    @property
    def member_id(self) -> str:
        return self.instance_id or f"{socket.gethostname()}-{self.device}-{self.bucket}"

    def group_id(self, settings: Settings) -> str:
        return self.group or settings.topic(f"asr-{self.bucket}")

    def input_topic(self, settings: Settings) -> str:
        return settings.topic(f"audio.bucket.{self.bucket}")


@dataclass(frozen=True)
class _Queued:
    """A consumed message, decoded once. Undecodable values cost nothing (they go to the DLQ)."""

    msg: Message
    position: Position  # with the partition's generation when consumed
    call: RoutedCall | None
    error: str | None

    @classmethod
    def of(cls, msg: Message, position: Position) -> "_Queued":
        try:
            return cls(msg, position, decode(msg.value(), RoutedCall), None)
        except DecodeError as exc:
            return cls(msg, position, None, str(exc))

    @property
    def duration_s(self) -> float:
        return self.call.duration_s if self.call else 0.0


@dataclass
class _Prepared:
    positions: list[Position]
    ready: list[Ready]
    failed: list[Failed]


class AsrWorker:
    def __init__(self, settings: Settings, opts: WorkerOptions, engine: Engine,
                 health: StageHealth | None = None) -> None:
        self.settings, self.opts, self.engine = settings, opts, engine
        self.health = health or StageHealth(f"asr-{opts.bucket}", settings.liveness_limit_s)
        self.budget = BatchBudget(opts.max_calls, opts.max_audio_s)
        self.input_topic = opts.input_topic(settings)
        self.output_topic = settings.topic("asr.transcripts")
        self.dlq_topic = settings.topic("asr.dlq")
        self.limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
        self.fetcher = Fetcher(MinioStore(storage_client(settings)), opts.fetch_threads)
        self.compute = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self.prepare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self.metrics = WorkerMetrics(opts.bucket)
        self.pending: deque[_Queued] = deque()
        self.checkpoint = Checkpoint()
        self.stopping = threading.Event()
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self._abandoned: list[Producer] = []

    # -- clients (created in the process that uses them, after any fork) -------------------

    def _connect(self) -> None:
        self._new_consumer()
        self._new_producer()

    def _new_consumer(self) -> None:
        common = self.settings.kafka_common()
        self.consumer = Consumer({
            **common,
            "group.id": self.opts.group_id(self.settings),
            "group.instance.id": self.opts.member_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": self.opts.session_timeout_ms,
            "max.poll.interval.ms": 600000,
        })
        self.consumer.subscribe([self.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _rejoin(self, err: KafkaError) -> None:
        """A fatal consumer error (e.g. a static member fenced after a broker restart) ends that
        consumer for good: drop what it fetched, and join again with a fresh one, which
        resumes from the committed offsets. Batches in flight can no longer commit."""
        log.warning("consumer_fatal", error=str(err))
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        self.checkpoint.revoke(assigned)
        self.health.revoked(assigned)
        self.pending.clear()
        try:
            self.consumer.close()
        except KafkaException as exc:
            log.warning("consumer_close_failed", error=str(exc))
        self._new_consumer()

    def _new_producer(self) -> None:
        if self.producer is not None:
            # Never destroyed: destroying a producer stuck in a transactional call blocks too.
            self._abandoned.append(self.producer)
        self.producer = Producer(self.producer_config())
        self.producer.init_transactions(60)  # fences a previous incarnation, aborting its open transaction

    def producer_config(self) -> dict:
        return {
            **self.settings.kafka_common(),
            # A replay group's worker must not fence the regular worker on the same host.
            "transactional.id": self.settings.topic(f"callqa-asr-{self.opts.bucket}-{self.opts.member_id}"
                                                    + (f"-{self.opts.group}" if self.opts.group else "")),
            "transaction.timeout.ms": self.opts.transaction_timeout_ms,
            "linger.ms": 5,
            # the catalog's limit, not librdkafka's 1 MB: a refused produce would abort and rewind for ever
            "message.max.bytes": self.limits.producer_max_bytes(["asr.transcripts", "asr.dlq"]),
        }

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.checkpoint.assign((p.topic, p.partition) for p in partitions)
        # librdkafka keeps a partition's pause flag across a revoke: one revoked while a batch
        # computed (paused) and handed back later would otherwise never be fetched again
        consumer.resume(partitions)
        self.health.assigned((p.topic, p.partition) for p in partitions)
        log.info("partitions_assigned", partitions=[p.partition for p in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        self.checkpoint.revoke(gone)  # batches in flight from these partitions will not be committed
        self.health.revoked(gone)
        self.pending = deque(q for q in self.pending if (q.msg.topic(), q.msg.partition()) not in gone)
        log.info("partitions_revoked", partitions=[p.partition for p in partitions])

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        self._connect()
        log.info("worker_started", bucket=self.opts.bucket, member=self.opts.member_id, topic=self.input_topic)
        next_batch: Future[_Prepared] | None = None
        try:
            while not self.stopping.is_set():
                self.health.beat()
                if next_batch is None:
                    next_batch = self._prefetch()
                    if next_batch is None:
                        continue
                wait_start = time.perf_counter()
                batch = next_batch.result()
                self.metrics.storage_wait_s.inc(time.perf_counter() - wait_start)
                compute = self.compute.submit(self._transcribe, batch)
                next_batch = None if self.stopping.is_set() or self._memory_high() else self._prefetch()
                transcripts = self._wait_polling(compute)
                if not self._commit(batch, transcripts) and next_batch is not None:
                    # Rewound to the committed offsets: the prefetched calls will be delivered again.
                    next_batch.cancel()
                    next_batch = None
        finally:
            self._close()

    def _memory_high(self) -> bool:
        if self.opts.memory_watermark_bytes is None:
            return False
        reserved = self.engine.device.memory_bytes()["reserved"]
        if reserved > self.opts.memory_watermark_bytes:
            log.info("backpressure_on", reserved_bytes=reserved, watermark_bytes=self.opts.memory_watermark_bytes)
            return True
        return False

    def _gather(self) -> list[_Queued]:
        """Up to the budget, within one window; leftovers wait in ``pending`` for the next batch."""
        deadline = time.monotonic() + self.opts.window_ms / 1000
        while len(self.pending) < self.opts.max_calls and time.monotonic() < deadline:
            got = self.consumer.consume(self.opts.max_calls, timeout=max(0.0, deadline - time.monotonic()))
            for msg in got:
                if msg.error():
                    if msg.error().fatal():
                        self._rejoin(msg.error())
                        return []
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("consume_error", error=str(msg.error()))
                    continue
                self.pending.append(self._queued(msg))
        taken = next(pack_in_order(self.pending, self.budget), [])
        for _ in taken:
            self.pending.popleft()
        return taken

    def _queued(self, msg: Message) -> _Queued:
        return _Queued.of(msg, self.checkpoint.stamp(msg.topic(), msg.partition(), msg.offset()))

    def _prefetch(self) -> Future[_Prepared] | None:
        queued = self._gather()
        if not queued:
            return None
        return self.prepare_pool.submit(self._prepare, queued)

    def _prepare(self, queued: list[_Queued]) -> _Prepared:
        items, failed = [], []
        for q in queued:
            msg = q.msg
            source = SourcePosition(topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
            if q.call is None:
                failed.append(Failed(msg, DeadLetter.of(payload=msg.value(), key=msg.key(), stage="asr",
                                                        reason="malformed_event", message=q.error, source=source)))
            else:
                items.append((msg, q.call, msg.value(), source))
        results = [self.fetcher.fetch_one(*item) for item in items] if len(items) < 2 else self.fetcher.fetch_all(items)
        return _Prepared([q.position for q in queued], [r for r in results if isinstance(r, Ready)],
                         failed + [r for r in results if isinstance(r, Failed)])

    def _transcribe(self, batch: _Prepared) -> list[Transcript]:
        if not batch.ready:
            return []
        started = time.perf_counter()
        try:
            results = self.engine.transcribe_batch([r.audio for r in batch.ready])
        except Exception as exc:  # noqa: BLE001 - find the call at fault, keep the others
            log.warning("batch_failed", error=repr(exc), calls=len(batch.ready))
            return self._transcribe_one_by_one(batch)
        wall_s = time.perf_counter() - started
        self.metrics.observe_batch(batch.ready, self.engine.last_batch_stats, wall_s)
        return [to_transcript(r.call, res, {"fetch_s": r.fetch_s, "batch_wall_s": wall_s}, self.opts.replay_id)
                for r, res in zip(batch.ready, results)]

    def _transcribe_one_by_one(self, batch: _Prepared) -> list[Transcript]:
        out, ok = [], []
        for r in batch.ready:
            try:
                out.append(to_transcript(r.call, self.engine.transcribe(r.audio), {"fetch_s": r.fetch_s},
                                         self.opts.replay_id))
                ok.append(r)
            except Exception as exc:  # noqa: BLE001 - one bad call must not stop the worker
                batch.failed.append(Failed(r.tag, DeadLetter.of(
                    payload=r.tag.value(), key=r.tag.key(), reason="asr_failed", message=repr(exc), stage="asr",
                    source=SourcePosition(topic=r.tag.topic(), partition=r.tag.partition(), offset=r.tag.offset()))))
        batch.ready[:] = ok
        return out

    def _wait_polling(self, compute: Future[list[Transcript]]) -> list[Transcript]:
        """Keep the group membership alive while the engine computes; buffer what arrives."""
        assignment = self.consumer.assignment()
        self.consumer.pause(assignment)
        fatal: KafkaError | None = None
        try:
            while not compute.done():
                self.health.beat()
                msg = self.consumer.poll(0.1)
                if msg is None:
                    continue
                if not msg.error():
                    self.pending.append(self._queued(msg))  # from a partition assigned while paused
                elif msg.error().fatal():
                    fatal = msg.error()  # reported once: rejoin when the batch is done (it will not commit)
        finally:
            if fatal is None:
                self.consumer.resume(self.consumer.assignment())
        if fatal is not None:
            self._rejoin(fatal)
        return compute.result()

    def _commit(self, batch: _Prepared, transcripts: list[Transcript]) -> bool:
        """Produce the batch's outputs and commit its offsets in one transaction.
        False when the transaction was aborted and the consumer rewound."""
        plan = self.checkpoint.plan(batch.positions)
        if plan.stale or plan.behind:
            log.info("batch_partly_dropped", revoked=plan.stale, already_committed=plan.behind)
        if not plan.offsets:
            return True
        keep, offsets = plan.keep, plan.offsets
        try:
            self.producer.begin_transaction()
            for ready, t in zip(batch.ready, transcripts):  # per message: call ids may repeat in a batch
                if _pos(ready.tag) in keep:
                    self._produce_transcript(ready, t, batch)
            for failed in batch.failed:
                if _pos(failed.tag) in keep:
                    letter = with_attempts(failed.letter, int_header(failed.tag.headers(), REDRIVE_ATTEMPT))
                    self.producer.produce(self.dlq_topic, key=failed.tag.key(), value=encode(letter))
            _with_deadline(self.producer.send_offsets_to_transaction,
                           [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                           self.consumer.consumer_group_metadata(), 30)
            _with_deadline(self.producer.commit_transaction, 30)
        except KafkaException as exc:
            self._recover(exc)
            return False
        self.checkpoint.committed(plan)
        dead = [f for f in batch.failed if _pos(f.tag) in keep]
        self.metrics.committed(sum(_pos(r.tag) in keep for r in batch.ready), len(dead))
        self._report_lag(offsets)
        for failed in dead:
            log.warning("call_dead_lettered", call_id=failed.letter.original_key, reason=failed.letter.reason,
                        partition=failed.tag.partition(), offset=failed.tag.offset())
        return True

    def _produce_transcript(self, ready: Ready, raw: Transcript, batch: _Prepared) -> None:
        t = redact_transcript(raw)  # no clear-text PII on asr.transcripts
        key, value = t.call_id.encode(), encode(t)
        if self.limits.fits("asr.transcripts", key, value):
            self.producer.produce(self.output_topic, key=key, value=value)
            if self.settings.publish_raw_transcripts and self.limits.fits("asr.transcripts.raw", key, encode(raw)):
                self.producer.produce(self.settings.topic("asr.transcripts.raw"), key=key, value=encode(raw))
            return
        msg = ready.tag
        batch.failed.append(Failed(msg, too_large_letter(
            stage="asr", topic=self.output_topic, size_bytes=len(value), limit_bytes=self.limits.limit("asr.transcripts"),
            payload=msg.value(), key=msg.key(), source=SourcePosition(topic=msg.topic(), partition=msg.partition(),
                                                                      offset=msg.offset()))))

    def _report_lag(self, committed: dict[tuple[str, int], int]) -> None:
        for (topic, partition), offset in committed.items():
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            if high >= 0:
                self.metrics.lag(partition, max(0, high - offset))

    def _recover(self, exc: KafkaException) -> None:
        """Abort and re-read from the committed position; a fatal error gets a fresh producer."""
        err = exc.args[0]
        log.warning("transaction_failed", error=str(err), abortable=err.txn_requires_abort(), fatal=err.fatal())
        self.metrics.aborts.inc()
        if err.fatal():
            self._new_producer()
        else:
            try:
                self.producer.abort_transaction(60)
            except KafkaException as abort_exc:
                log.warning("transaction_abort_failed", error=str(abort_exc))
                self._new_producer()
        self.pending.clear()
        while not self.stopping.is_set():  # the broker may still be down: keep trying, never crash
            try:
                assignment = self.consumer.assignment()
                if assignment:
                    for tp in self.consumer.committed(assignment, timeout=30):
                        self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                return
            except KafkaException as rewind_exc:
                log.warning("rewind_failed", error=str(rewind_exc))
                self.stopping.wait(1.0)

    def _close(self) -> None:
        self.fetcher.close()
        self.prepare_pool.shutdown(wait=False, cancel_futures=True)
        self.compute.shutdown(wait=True)
        if self.consumer is not None:
            self.consumer.close()
        log.info("worker_stopped", bucket=self.opts.bucket)


def _with_deadline(call, *args, grace_s: float = 10.0):  # noqa: ANN001, ANN202
    """Run a blocking transactional call, giving up when it overruns its own timeout.

    librdkafka's send_offsets_to_transaction can ignore its timeout and block for good
    when the group coordinator goes away (a broker restart; librdkafka issues 5456 and
    5511, seen here in the broker-restart test). A hung call becomes a fatal error, so
    the worker replaces its producer (fencing the stuck one) and rewinds.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="txn-call", daemon=True)
    thread.start()
    thread.join(args[-1] + grace_s)
    if thread.is_alive():
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{call.__name__} hung past its timeout", fatal=True))
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


def _pos(msg: Message) -> tuple[str, int, int]:
    return msg.topic(), msg.partition(), msg.offset()
