"""ASR worker: a confluent-kafka consumer group per duration bucket, exactly once.

One process per accelerator, in group ``asr-<bucket>``. The loop:

1. gather RoutedCalls for at most ``window_ms`` or until the batch budget is full;
2. fetch + decode their audio concurrently, while the engine computes the previous batch;
3. transcribe the batch, then in one transaction produce every Transcript (and the
   dead letters of calls that failed) and commit the batch's input offsets, while the engine
   computes the next batch (a commit that rewinds discards that next batch: read again).

While the engine computes, and while a fetch waits out a storage outage (retried up to
``storage_retry_deadline_s``, see :mod:`pipeline.stages.retry`), the consumer is paused and
keeps polling, so heartbeats and ``max.poll.interval.ms`` hold. An abortable transaction error aborts
and rewinds to the committed offsets; nothing is produced twice or lost. A batch from a
partition revoked after its fetch is dropped even if the partition came back (see
:mod:`pipeline.stages.checkpoint`), and committed offsets never move backwards.

This module holds the client lifecycle and the loop; the parts live apart and are
unit-tested with fakes: gathering and the window (:mod:`pipeline.stages.gather`),
fetch + compute (:mod:`pipeline.stages.asr`), the transaction
(:mod:`pipeline.run.worker_commit`).
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.minio_store import retrying_store
from pipeline.batching import BatchBudget
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import CallQAError
from pipeline.headers import addressed_elsewhere
from pipeline.logs import get_logger
from pipeline.run.worker_commit import BatchCommitter
from pipeline.run.worker_metrics import WorkerMetrics
from pipeline.runtime.health import StageHealth
from pipeline.stages.asr import AsrBatch, AsrStage, Prepared, SpeechEngine
from pipeline.stages.checkpoint import Checkpoint, Position
from pipeline.stages.deadline import RtfxEstimate
from pipeline.stages.gather import Gatherer, Queued
from pipeline.stages.outputs import Writer
from pipeline.stages.replay_bound import ReplayTally, StopOffsets
from pipeline.stages.retry import RetryInterrupted, interruptible_sleep
from pipeline.stages.sizes import MessageLimits
from pipeline.stages.storage import ObjectStore
from pipeline.stages.window_estimate import micro_batch_windows

log = get_logger("callqa.worker")
T = TypeVar("T")
FETCH_BYTES_PER_PARTITION = 16384  # ~20 routed calls
BOUND_CHECK_S = 2.0  # how often an idle bounded replay asks whether its group is done
IDLE_REPORT_S = 10.0  # how often an idle member with partitions logs where they stand
POLL_WAIT_S = 0.1  # the longest the loop goes without serving the consumer (rebalance callbacks) while it waits


@dataclass(frozen=True)
class WorkerOptions:
    bucket: str
    device: str = "cpu"
    instance_id: str | None = None  # static membership id; default host + device + bucket
    window_ms: int = 50
    max_calls: int = 16
    max_audio_s: float = 1800.0
    # Estimated model windows per micro-batch. None: the most whole model batches of the engine's
    # that max_audio_s fills (pipeline.stages.window_estimate); 0: no window cap.
    max_windows: int | None = None
    fetch_threads: int = 4
    session_timeout_ms: int = 15000
    transaction_timeout_ms: int = 300000
    # Backpressure: no prefetch (one batch in flight, not two) while device memory is above this.
    memory_watermark_bytes: int | None = None
    group: str | None = None  # consumer group; default asr-<bucket> (another one replays the bucket)
    replay_id: str | None = None  # carried by every transcript of a replay
    stop_at: StopOffsets | None = None  # a bounded replay: ends once the group reached these offsets

    @property
    def member_id(self) -> str:
        return self.instance_id or f"{socket.gethostname()}-{self.device}-{self.bucket}"

    def group_id(self, settings: Settings) -> str:
        return self.group or settings.topic(f"asr-{self.bucket}")

    def replay_tag(self, settings: Settings) -> str | None:
        """A group other than the live one replays: its output is always tagged (by default with
        the group's name), never passed off as the live group's with ``replay_id = null``."""
        if self.replay_id or self.group_id(settings) == settings.topic(f"asr-{self.bucket}"):
            return self.replay_id
        return self.group

    def input_topic(self, settings: Settings) -> str:
        return settings.topic(f"audio.bucket.{self.bucket}")


def consumer_config(settings: Settings, opts: WorkerOptions) -> dict[str, Any]:
    """The worker's consumer: a static member of its bucket's group, reading committed records."""
    return {
        **settings.kafka_common(),
        "group.id": opts.group_id(settings),
        "group.instance.id": opts.member_id,
        "partition.assignment.strategy": "cooperative-sticky",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": opts.session_timeout_ms,
        "max.poll.interval.ms": 600000,
        # A few records of each partition per fetch and few kept queued (librdkafka's defaults:
        # 1 MB per partition per fetch, 100,000 records queued), so that what a worker has
        # fetched but not processed stays small and the records of all its partitions reach it
        # early, to be taken in turns (pipeline/stages/gather.py; held back per partition:
        # AsrWorker._hold_back). tests/integration/test_worker_fetch.py checks what a fetch holds.
        "max.partition.fetch.bytes": FETCH_BYTES_PER_PARTITION,
        "queued.min.messages": opts.max_calls,
    }


def micro_batch_cap(opts: WorkerOptions, model_batch: int | None) -> int | None:
    """The micro-batch's window cap (None: none), from the options and the engine's model batch
    (test engines have none)."""
    if opts.max_windows is not None:
        return opts.max_windows or None
    return None if model_batch is None else micro_batch_windows(model_batch, opts.max_audio_s)


@dataclass
class _InFlight:
    positions: list[Position]
    prepared: Prepared[Message]


@dataclass(frozen=True)
class _Computed:
    batch: _InFlight
    outcomes: AsrBatch[Message]


class AsrWorker:
    def __init__(
        self,
        settings: Settings,
        opts: WorkerOptions,
        engine: SpeechEngine,
        health: StageHealth | None = None,
        store: ObjectStore | None = None,
    ) -> None:
        self.settings, self.opts, self.engine = settings, opts, engine
        self.health = health or StageHealth.from_settings(f"asr-{opts.bucket}", settings)
        self.input_topic = opts.input_topic(settings)
        self.output_topic = settings.topic("asr.transcripts")
        self.dlq_topic = settings.topic("asr.dlq")
        self.group_id = opts.group_id(settings)
        self.limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
        self.stopping = threading.Event()
        # storage retries end early when the worker stops (the batch is then not committed)
        store = store or retrying_store(settings, interruptible_sleep(self.stopping))
        self.fetcher = Fetcher(store, opts.fetch_threads)
        self.stage = AsrStage(self.fetcher, engine, replay_id=opts.replay_tag(settings))
        self.compute = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self.prepare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare")
        self.metrics = WorkerMetrics(opts.bucket)
        self.rtfx = RtfxEstimate()  # of recent batches: how long the next one may take (liveness)
        device = getattr(engine, "device", None)  # test engines have none
        if device is not None:
            self.metrics.memory_limit(device.memory_limit_bytes())
        self.checkpoint = Checkpoint()
        self.max_windows = micro_batch_cap(opts, getattr(engine, "model_batch_windows", None))
        self.gatherer: Gatherer[Message] = Gatherer(
            self._consume,
            self.checkpoint,
            BatchBudget(opts.max_calls, opts.max_audio_s),
            opts.window_ms,
            max_windows=self.max_windows,
        )
        self.consumer: Any = None
        self.committer: BatchCommitter | None = None
        self.tally = ReplayTally()  # a bounded replay's records and its group's last check
        self.bound_watch: Any = None
        self._next_bound_check = 0.0
        self._idle_since: float | None = None  # assigned partitions and nothing to read, since
        self._held: set[tuple[str, int]] = set()  # partitions paused with a batch's worth waiting

    # -- clients (created in the process that uses them, after any fork) -------------------

    def _connect(self) -> None:
        if self.opts.stop_at is not None:
            from pipeline.runtime.replay_watch import BoundWatch

            self.opts.stop_at.check_topic(self.input_topic)
            self.bound_watch = BoundWatch(self.settings, self.opts.group_id(self.settings), self.opts.stop_at)
        self._new_consumer()
        self.committer = self._committer(self.consumer, self._new_producer)

    def _new_consumer(self) -> None:
        self.consumer = Consumer(consumer_config(self.settings, self.opts))
        self.consumer.subscribe(
            [self.input_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        if self.committer is not None:
            self.committer.consumer = self.consumer

    def _rejoin(self, err: KafkaError) -> None:
        """A fatal consumer error (e.g. a static member fenced after a broker restart) ends that
        consumer for good: drop what it fetched, and join again with a fresh one, which
        resumes from the committed offsets. Batches in flight can no longer commit."""
        log.warning("consumer_fatal", error=str(err))
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        self.checkpoint.revoke(assigned)
        self.health.revoked(assigned)
        self.gatherer.clear()
        self._held.clear()
        try:
            self.consumer.close()
        except KafkaException as exc:
            log.warning("consumer_close_failed", error=str(exc))
        self._new_consumer()

    def _committer(self, consumer: Any, new_producer: Any) -> BatchCommitter:
        writer = Writer(self.limits, self.group_id, self.opts.replay_id, self.settings.topic)
        return BatchCommitter(
            consumer,
            new_producer,
            self.checkpoint,
            writer,
            self.metrics,
            self.settings.publish_raw_transcripts,
            self.stopping,
            rejoin=self._rejoin,
        )

    def _new_producer(self) -> Producer:
        producer = Producer(self.producer_config())
        producer.init_transactions(60)  # fences a previous incarnation, aborting its open transaction
        return producer

    def producer_config(self) -> dict[str, Any]:
        return {
            **self.settings.kafka_common(),
            # A replay group's worker must not fence the regular worker on the same host.
            "transactional.id": self.settings.topic(
                f"callqa-asr-{self.opts.bucket}-{self.opts.member_id}"
                + (f"-{self.opts.group}" if self.opts.group else "")
            ),
            "transaction.timeout.ms": self.opts.transaction_timeout_ms,
            "linger.ms": 5,
            # the catalog's limit, not librdkafka's 1 MB: a refused produce would abort and rewind for ever
            "message.max.bytes": self.limits.producer_max_bytes(["asr.transcripts", "asr.dlq"]),
        }

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.checkpoint.assign((p.topic, p.partition) for p in partitions)
        # librdkafka keeps a partition's pause flag across a revoke: one revoked while a batch
        # computed (paused) and handed back later would otherwise never be fetched again
        consumer.resume(partitions)
        self.health.assigned((p.topic, p.partition) for p in partitions)
        log.info("partitions_assigned", partitions=[p.partition for p in partitions])

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        gone = [(p.topic, p.partition) for p in partitions]
        self.checkpoint.revoke(gone)  # batches in flight from these partitions will not be committed
        self.gatherer.drop(gone)
        self._held.difference_update(gone)
        self.health.revoked(gone)
        log.info("partitions_revoked", partitions=[p.partition for p in partitions])

    def _consume(self, max_messages: int, timeout_s: float) -> list[Message]:
        good = []
        for msg in self.consumer.consume(max_messages, timeout=timeout_s):
            if msg.error():
                if _is_fatal(msg.error()):
                    self._rejoin(msg.error())  # what was gathered is dropped; the new member rereads it
                    return []
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("consume_error", error=str(msg.error()))
                continue
            if addressed_elsewhere(msg.headers(), self.group_id):
                # another group's redrive: passed by, its offset committed with a later record of
                # the partition (or read and passed by again after a restart)
                continue
            if self._keeps(msg):
                good.append(msg)
        return good

    def _keeps(self, msg: Message) -> bool:
        """A bounded replay leaves records that arrived after its start (never processed, never
        committed by this group); everything else is kept."""
        bound = self.opts.stop_at
        return bound is None or bound.keeps(msg.topic(), msg.partition(), msg.offset())

    def _bound_reached(self) -> bool:
        """Idle: has the whole group (not only this member) reached its stop offsets?"""
        if self.bound_watch is None or time.monotonic() < self._next_bound_check:
            return False
        self._next_bound_check = time.monotonic() + BOUND_CHECK_S
        try:
            self.tally.last = self.bound_watch.check()
        except (CallQAError, KafkaException) as exc:  # a check that failed is retried, not taken as done
            log.warning("replay_bound_check_failed", error=str(exc))
            return False
        if self.tally.finished:
            log.info(
                "replay_bound_reached",
                stop_at=self.opts.stop_at.flag() if self.opts.stop_at else None,
                processed=self.tally.processed,
            )
        return self.tally.finished

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Fetch the next batch while one computes, and commit a batch while the next computes:
        the engine waits neither for storage nor for a transaction."""
        self._connect()
        log.info(
            "worker_started",
            bucket=self.opts.bucket,
            member=self.opts.member_id,
            topic=self.input_topic,
            max_calls=self.opts.max_calls,
            max_audio_s=self.opts.max_audio_s,
            max_windows=self.max_windows,
        )
        next_batch: Future[_InFlight] | None = None
        done: _Computed | None = None  # computed, not yet committed
        try:
            while not self.stopping.is_set():
                self.health.beat()
                if next_batch is None:
                    self._settle(done)  # nothing to compute beside the commit
                    done, next_batch = None, self._prefetch()
                    if next_batch is None:
                        self._note_idle()
                        if self._bound_reached():
                            break
                        continue
                    self._idle_since = None
                if done is not None and not next_batch.done():  # storage is slow: commit first
                    kept, done = self._settle(done), None
                    if not kept:
                        next_batch.cancel()  # rewound: its calls will be delivered again
                        next_batch = None
                        continue
                wait_start = time.perf_counter()
                try:
                    batch = self._wait_polling(next_batch)  # a storage outage can take minutes
                except RetryInterrupted:
                    break  # stopping during an outage: nothing of the batch is committed; it is read again
                self.metrics.storage_wait_s.inc(time.perf_counter() - wait_start)
                self.health.batch_started(sum(r.call.duration_s for r in batch.prepared.ready), self.rtfx.value)
                compute = self.compute.submit(self._transcribe, batch.prepared)
                kept, done = self._settle(done), None
                next_batch = None
                if kept and not self.stopping.is_set() and not self._memory_high():
                    next_batch = self._prefetch()
                try:
                    outcomes = self._wait_polling(compute)
                finally:
                    self.health.batch_done()
                if kept:  # else its records lie after the offsets the commit rewound to: read again
                    done = _Computed(batch, outcomes)
            self._settle(done)
        finally:
            self._close()

    def _settle(self, done: _Computed | None) -> bool:
        """Commit a computed batch, if any; False where the commit rewound instead."""
        return done is None or self._commit(done.batch, done.outcomes)

    def _note_idle(self) -> None:
        """Every IDLE_REPORT_S without a record while partitions are assigned: where they stand
        (read position against the end), so an idle member beside a backlog shows why."""
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
            return
        if now - self._idle_since < IDLE_REPORT_S:
            return
        self._idle_since = now
        assigned = self.consumer.assignment()
        if not assigned:
            return
        stand = {}
        for tp in self.consumer.position(assigned):
            _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            stand[tp.partition] = f"{tp.offset}/{high}"
        log.info("idle_assigned", partitions=stand)

    def _memory_high(self) -> bool:
        if self.opts.memory_watermark_bytes is None:
            return False
        reserved = self.engine.device.memory_bytes()["reserved"]  # type: ignore[attr-defined]
        if reserved > self.opts.memory_watermark_bytes:
            log.info("backpressure_on", reserved_bytes=reserved, watermark_bytes=self.opts.memory_watermark_bytes)
            return True
        return False

    def _prefetch(self) -> Future[_InFlight] | None:
        queued = self.gatherer.gather()
        self._hold_back()
        if not queued:
            return None
        return self.prepare_pool.submit(self._prepare, queued)

    def _prepare(self, queued: list[Queued[Message]]) -> _InFlight:
        return _InFlight([q.position for q in queued], self.stage.prepare([q.input for q in queued]))

    def _transcribe(self, prepared: Prepared[Message]) -> AsrBatch[Message]:
        batch = self.stage.transcribe(prepared)
        if batch.batch_error is not None:
            log.warning("batch_failed", error=batch.batch_error, calls=len(prepared.ready))
        elif prepared.ready:
            self.metrics.observe_batch(prepared.ready, batch.stats, batch.wall_s)
            self.rtfx.observe(sum(r.call.duration_s for r in prepared.ready), batch.wall_s)
        return batch

    def _wait_polling(self, compute: Future[T]) -> T:
        """Keep the group membership alive while the engine computes or a fetch waits for
        storage; what arrives waits for the next batches, each partition held back once it has
        a batch's worth waiting (:meth:`_hold_back`)."""
        fatal: KafkaError | None = None
        overdue_logged = False
        while not compute.done():
            self.health.beat()
            if not overdue_logged and self.health.batch_overdue():
                overdue_logged = True  # /healthz fails from now on: the orchestrator restarts us
                log.error("batch_overdue", **self.health.liveness().detail)
            # poll(0), then wait on the future: a blocking poll would hold a finished batch
            # until its timeout (on average half of it, 50 ms a batch, measured in simulated nights)
            msg = self.consumer.poll(0)
            if msg is None:
                wait([compute], timeout=POLL_WAIT_S)
                continue
            if not msg.error():
                if self._keeps(msg) and not addressed_elsewhere(msg.headers(), self.group_id):
                    self.gatherer.add(msg)
                    self._hold_back()
            elif _is_fatal(msg.error()):
                fatal = msg.error()  # reported once: rejoin when the batch is done (it will not commit)
        if fatal is not None:
            self._rejoin(fatal)
        return compute.result()

    def _hold_back(self) -> None:
        """Pause a partition with a batch's worth waiting; resume it once half of that is taken.
        Pausing the whole assignment for every batch (as the worker once did) purged librdkafka's
        prefetch, and each resume fetched the lowest partition first: a worker drained its
        partitions one after another, and a member added mid-night was given drained ones."""
        waiting, cap = self.gatherer.waiting(), self.opts.max_calls
        full = [key for key, n in waiting.items() if n >= cap and key not in self._held]
        free = [key for key in self._held if waiting.get(key, 0) <= cap // 2]
        if full:
            self.consumer.pause([TopicPartition(t, p) for t, p in full])
            self._held.update(full)
        if free:
            self.consumer.resume([TopicPartition(t, p) for t, p in free])
            self._held.difference_update(free)

    def _commit(self, batch: _InFlight, outcomes: AsrBatch[Message]) -> bool:
        if self.committer is None:
            raise RuntimeError("the worker is not connected")
        if self.committer.commit(batch.positions, outcomes):
            for position in batch.positions:
                self.tally.count(position.partition)
            return True
        self.gatherer.clear()  # rewound: what waits will be delivered again
        self._held.clear()  # recover() resumed every partition before it rewound
        return False

    def _close(self) -> None:
        self.fetcher.close()
        self.prepare_pool.shutdown(wait=False, cancel_futures=True)
        self.compute.shutdown(wait=True)
        if self.committer is not None:
            self.committer.close()
        if self.consumer is not None:
            self.consumer.close()
        if self.bound_watch is not None:
            self.bound_watch.close()
        log.info("worker_stopped", bucket=self.opts.bucket)


def _is_fatal(err: KafkaError) -> bool:
    """librdkafka reports a fenced static member as an error whose code is ``_FATAL`` while its
    ``fatal()`` flag is false (seen in the broker-restart test): both end the consumer."""
    return bool(err.fatal()) or err.code() == KafkaError._FATAL
