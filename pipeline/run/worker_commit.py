"""The worker's transaction bookkeeping: one batch's outputs and input offsets, exactly once.

:class:`BatchCommitter` produces every Transcript (to asr.transcripts) and dead letter
(to asr.dlq) of a batch and commits its input offsets in one transaction, keeping only
what :class:`pipeline.stages.checkpoint.Checkpoint` still allows (nothing from a
partition revoked since the fetch, no offset below one already committed). On a failed
transaction it aborts (or replaces a fenced or hung producer) and rewinds the consumer
to the committed offsets. Clients come in through the constructor, so unit tests use fakes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipeline.events import SourcePosition
from pipeline.logs import get_logger
from pipeline.run.worker_metrics import WorkerMetrics
from pipeline.stages.asr import AsrBatch, AsrOutcome
from pipeline.stages.checkpoint import Checkpoint, CommitPlan, Position
from pipeline.stages.gather import position_of
from pipeline.stages.outputs import Received, Record, Writer, plan_transcribed

log = get_logger("callqa.worker")
REWIND_ATTEMPTS = 3  # tries to read the committed offsets (30 s each) before a fresh consumer


class TransactionalProducer(Protocol):
    def begin_transaction(self) -> None: ...

    def produce(self, topic: str, key: bytes | None, value: bytes) -> None: ...

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: Any, timeout: float) -> None: ...

    def commit_transaction(self, timeout: float) -> None: ...

    def abort_transaction(self, timeout: float) -> None: ...

    def close(self) -> Any: ...  # aborts an open transaction, flushes, frees the client


class GroupConsumer(Protocol):
    def assignment(self) -> list[TopicPartition]: ...

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]: ...

    def seek(self, partition: TopicPartition) -> None: ...

    def consumer_group_metadata(self) -> Any: ...

    def get_watermark_offsets(self, partition: TopicPartition, cached: bool = False) -> tuple[int, int]: ...


def received_of(msg: Any) -> Received:
    """The input message as the output planner sees it (a confluent-kafka ``Message``)."""
    topic, partition, offset = position_of(msg)
    return Received(
        msg.value() or b"", msg.key(), SourcePosition(topic=topic, partition=partition, offset=offset), msg.headers()
    )


class BatchCommitter:
    def __init__(
        self,
        consumer: GroupConsumer,
        new_producer: Callable[[], TransactionalProducer],
        checkpoint: Checkpoint,
        writer: Writer,
        metrics: WorkerMetrics,
        raw: bool = False,
        stopping: threading.Event | None = None,
        rejoin: Callable[[KafkaError], None] | None = None,
    ) -> None:
        self.consumer, self.new_producer, self.checkpoint = consumer, new_producer, checkpoint
        # limits, topic names, and the group and replay id recorded in each letter (a redrive comes back here)
        self.writer, self.metrics = writer, metrics
        self.raw = raw  # clear-text copies to asr.transcripts.raw, only when configured
        self.stopping = stopping or threading.Event()
        self.rejoin = rejoin  # replaces the consumer with a fresh member (the worker's); None: raise instead
        self.producer = new_producer()
        self.closing: list[threading.Thread] = []  # replaced producers being closed

    def commit(self, positions: Sequence[Position], batch: AsrBatch[Any]) -> bool:
        """Produce the batch's outputs and commit its offsets in one transaction.
        False when the transaction was aborted and the consumer rewound."""
        plan = self.checkpoint.plan(positions)
        if plan.stale or plan.behind:
            log.info("batch_partly_dropped", revoked=plan.stale, already_committed=plan.behind)
        if not plan.offsets:
            return True
        kept = [o for o in batch.outcomes if position_of(o.tag) in plan.keep]
        records = self.records(kept)
        try:
            self._transaction(plan, records)
        except KafkaException as exc:
            self.recover(exc)
            return False
        self.checkpoint.committed(plan)
        dead = [(r, o) for r, o in records if r.letter is not None]
        self.metrics.committed(len(kept) - len(dead), len(dead))
        self._report_lag(plan.offsets)
        for record, outcome in dead:
            topic, partition, offset = position_of(outcome.tag)
            log.warning(
                "call_dead_lettered",
                call_id=record.letter.original_key if record.letter else None,
                reason=record.letter.reason if record.letter else None,
                partition=partition,
                offset=offset,
            )
        return True

    def records(self, outcomes: Sequence[AsrOutcome[Any]]) -> list[tuple[Record, AsrOutcome[Any]]]:
        """What the transaction writes, per message (call ids may repeat in a batch): the outputs, then
        the letters. A letter the broker refuses fails commit_transaction: the batch is aborted and read again."""
        planned = [(r, o) for o in outcomes for r in plan_transcribed(o, received_of(o.tag), self.writer, self.raw)]
        return sorted(planned, key=lambda ro: ro[0].letter is not None)

    def _transaction(self, plan: CommitPlan, records: list[tuple[Record, AsrOutcome[Any]]]) -> None:
        self.producer.begin_transaction()
        for record, _ in records:
            self.producer.produce(self.writer.topic_name(record.topic), key=record.key, value=record.value)
        _with_deadline(
            self.producer.send_offsets_to_transaction,
            [TopicPartition(t, p, o) for (t, p), o in plan.offsets.items()],
            self.consumer.consumer_group_metadata(),
            TXN_CALL_TIMEOUT_S,
        )
        _with_deadline(self.producer.commit_transaction, TXN_CALL_TIMEOUT_S)

    def _report_lag(self, committed: dict[tuple[str, int], int]) -> None:
        for (topic, partition), offset in committed.items():
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            if high >= 0:
                self.metrics.lag(partition, max(0, high - offset))

    def recover(self, exc: KafkaException) -> None:
        """Abort and re-read from the committed position; a fatal error gets a fresh producer, and a
        consumer that cannot read its committed offsets in REWIND_ATTEMPTS tries is replaced by a fresh one."""
        err = exc.args[0]
        log.warning("transaction_failed", error=str(err), abortable=err.txn_requires_abort(), fatal=err.fatal())
        self.metrics.aborts.inc()
        if err.fatal():
            self.replace_producer()
        else:
            try:
                self.producer.abort_transaction(60)
            except KafkaException as abort_exc:
                log.warning("transaction_abort_failed", error=str(abort_exc))
                self.replace_producer()
        for attempt in range(1, REWIND_ATTEMPTS + 1):  # the broker may still be down: try again
            if self.stopping.is_set():
                return
            try:
                assignment = self.consumer.assignment()
                if assignment:
                    # a partition the worker holds back (paused) must not resume at its consumed
                    # position later, past the rewind
                    self.consumer.resume(assignment)
                    for tp in self.consumer.committed(assignment, timeout=30):
                        self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                return
            except KafkaException as rewind_exc:
                log.warning("rewind_failed", error=str(rewind_exc), attempt=attempt)
                failure = rewind_exc
                if attempt < REWIND_ATTEMPTS:
                    self.stopping.wait(1.0)
        # Seen after a broker restart: the consumer's session had timed out, its group was empty, and its
        # committed() timed out for 10 minutes while the broker answered other clients' offset fetches
        # at once (likely the member waits for the revoke that only poll() serves, and this loop never
        # polls). A fresh member starts from the committed offsets: the same rewind.
        if self.rejoin is None:
            raise failure
        self.rejoin(failure.args[0])

    def replace_producer(self) -> None:
        """A fresh producer (its ``init_transactions`` fences the old one), then the old one closed
        in a thread of its own: closing a producer stuck in a hung transactional call blocks too."""
        old = self.producer
        self.producer = self.new_producer()
        self.closing = [t for t in self.closing if t.is_alive()] + [_close_in_background(old)]

    def close(self, timeout_s: float = 10.0) -> None:
        """At shutdown: close the producer (aborting an open transaction) and wait, at most
        ``timeout_s``, for it and for replaced ones still closing."""
        self.closing.append(_close_in_background(self.producer))
        deadline = time.monotonic() + timeout_s
        for thread in self.closing:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.closing = [t for t in self.closing if t.is_alive()]


def _close_in_background(producer: TransactionalProducer) -> threading.Thread:
    """Close a producer in a daemon thread, which ends holding the last reference to it: the client
    is freed when the close returns, and a close that hangs does not hold up the worker or its exit."""

    def close() -> None:
        try:
            producer.close()
        except Exception as exc:  # noqa: BLE001 - a fenced producer may refuse its abort; it is gone anyway
            log.warning("producer_close_failed", error=str(exc))

    thread = threading.Thread(target=close, name="producer-close", daemon=True)
    thread.start()
    return thread


# A transactional call's own timeout; past it plus the grace the call is taken as hung. On a healthy
# broker these calls take milliseconds, so a timeout is a broker or coordinator gone: at 30 s + 10 s
# a simulated night's broker restart (down 5.9 s) left every bucket without output for 37-39 s after
# the broker was back. A call that overruns on a slow broker costs a rewind, never a duplicate.
TXN_CALL_TIMEOUT_S = 15.0
TXN_CALL_GRACE_S = 5.0


def _with_deadline(call, *args, grace_s: float = TXN_CALL_GRACE_S):
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
