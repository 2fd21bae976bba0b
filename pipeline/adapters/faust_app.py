"""What the Faust stages (router, QA) share: the app settings and exactly-once sends."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import faust
from faust.sensors import Monitor
from faust.transport.consumer import TopicPartitionGroup
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.types import TP

from pipeline.adapters.faust_auth import faust_ignored_keys, faust_security
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import SourcePosition
from pipeline.logs import get_logger
from pipeline.runtime.health import StageHealth
from pipeline.stages.outputs import Received
from pipeline.stages.sizes import MessageLimits

log = get_logger("callqa.faust")
EXIT_SEND_FAILED = 70  # EX_SOFTWARE: an output or dead letter the broker did not take


def create_faust_app(settings: Settings, app_id: str, topic_partitions: int | None = None) -> faust.App:
    security = faust_security(settings.kafka_config)  # CALLQA_KAFKA_CONFIG, as the confluent clients take it
    ignored = faust_ignored_keys(settings.kafka_config)
    if ignored:  # tuning for the confluent clients (workers, tools); said once, at start
        log.warning("kafka_config_ignored", app_id=app_id, keys=ignored,
                    why="not security settings; they apply to the confluent-kafka clients only")
    datadir = Path(settings.state_dir).resolve() / "faust" / app_id
    datadir.mkdir(parents=True, exist_ok=True)
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    largest = limits.producer_max_bytes(limits.by_topic)
    app = faust.App(
        app_id,
        broker=f"kafka://{settings.kafka_bootstrap}",
        store="memory://",
        processing_guarantee="exactly_once",  # read committed; offsets, tables, outputs in transactions
        topic_replication_factor=settings.replication_factor or 1,
        topic_allow_declare=True,
        web_enabled=False,
        datadir=str(datadir),
        broker_commit_interval=settings.stage_commit_interval_s,
        broker_commit_livelock_soft_timeout=60.0,
        broker_session_timeout=20.0,  # a killed member's partitions move on after 20 s, not 60
        # One event may wait out a storage outage (the router's probe); with a full stream buffer
        # the fetcher waits for it, so the poll interval must outlast the retry deadline and a read.
        broker_max_poll_interval=max(1000.0, settings.storage_retry_deadline_s + 120.0),
        consumer_auto_offset_reset="earliest",
        # the catalog's limits, not aiokafka's 1 MB: a refused send would fail the event
        producer_max_request_size=largest,
        consumer_max_fetch_size=largest,
        Monitor=CommitMonitor,
        **({"topic_partitions": topic_partitions} if topic_partitions else {}),
        **security,
    )
    app.transport.Consumer = GatedConsumer  # its commits wait for outputs in flight (see GatedConsumer)
    return app


class GatedConsumer(AIOKafkaConsumer):
    """Faust's consumer, whose commit never takes its offsets while an agent's outputs are in flight.

    A commit takes the acknowledged offsets, then awaits before it commits the transactions. An
    agent sending meanwhile put its outputs into those transactions while their inputs, acknowledged
    only after delivery, stayed out of the offsets: both were published and the inputs read again
    after a crash (a redaction event twice under SIGKILL, 2026-12-06). The agents send under
    ``commit_gate`` and acknowledge their inputs before they release it (:func:`send_batch_in_source_transactions`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commit_gate = asyncio.Lock()

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        async with self.commit_gate:
            return await super().force_commit(topics, start_new_transaction=start_new_transaction)


class CommitMonitor(Monitor):
    """Faust's own monitor, which also tells listeners the input offsets each commit covered.

    Faust calls ``on_tp_commit`` after its commit of a transaction (exactly_once) returns,
    with the next offset of every input partition committed. It is the one place that says
    when a transaction's outputs, sent earlier, became visible.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commit_listeners: list[Callable[[Mapping[Any, int]], None]] = []

    def on_tp_commit(self, tp_offsets: Mapping[TP, int]) -> None:
        super().on_tp_commit(tp_offsets)  # type: ignore[arg-type]
        for listener in self.commit_listeners:
            listener(tp_offsets)


def as_received(event: Any) -> Received:
    """A Faust event as a stage's input: its value, key, where it was read, and its headers."""
    msg = event.message
    return Received(event.value, event.key, SourcePosition(topic=msg.topic, partition=msg.partition,
                                                           offset=msg.offset), event.headers)


def on_commit(app: faust.App, listener: Callable[[Mapping[Any, int]], None]) -> None:
    """Call ``listener(next offset by input partition)`` after each commit that succeeded.

    Not after a commit that crashed the app (Faust reports a fenced producer's commit as done
    and crashes): nothing sent in that transaction may be taken as committed.
    """
    monitor = app.monitor
    if not isinstance(monitor, CommitMonitor):
        raise TypeError(f"the app's monitor is {type(monitor).__name__}, not CommitMonitor")

    def guarded(tp_offsets: Mapping[TP, int]) -> None:
        if app.crash_reason is None and not app.should_stop:
            listener(tp_offsets)

    monitor.commit_listeners.append(guarded)


def watch_health(app: faust.App, health: StageHealth | None, input_topic: str, every_s: float = 5.0) -> None:
    """Feed a stage's health: a timer beats while the event loop turns; assignments of the input topic."""
    if health is None:
        return

    @app.timer(interval=every_s)
    async def _beat() -> None:
        health.beat()

    @app.on_partitions_assigned.connect
    async def _assigned(sender: object, assigned: set, **_: object) -> None:
        health.replace_assignment((tp.topic, tp.partition) for tp in assigned if tp.topic == input_topic)


def stop_transactions_of_lost_partitions(app: faust.App, input_topics: Collection[str]) -> None:
    """Stop a partition's transactional producer when the partition goes to another member.

    Faust (0.15.3) leaves it running; the new owner's producer fences it, and when the
    partition comes back Faust reuses the fenced producer: the first output fails with
    ProducerFenced and the app crashes (seen in the router hand-over test). Stopped here,
    a partition that comes back gets a fresh producer. One producer serves partition p of
    every input topic (co-partitioned), so it is stopped once p of none of them is left.
    """
    owned: set[str] = set()

    @app.on_partitions_assigned.connect
    async def _stop_lost(sender: object, assigned: set, **_: object) -> None:
        now = {_transactional_id(app, tp.topic, tp.partition) for tp in assigned if tp.topic in input_topics}
        for transactional_id in sorted(owned - now):
            await app.producer.stop_transaction(transactional_id)
        owned.clear()
        owned.update(now)


def abort_open_transactions_on_revoke(app: faust.App) -> None:
    """Roll back what each revoked partition produced since its last commit.

    Faust (0.15.3) leaves that transaction open across a rebalance and rewinds the partition to
    its committed offset; for a partition it keeps, ``begin_transaction`` then fails on the open
    one ("Exception in begin_transaction"), the events are processed again into the same
    transaction and the next commit publishes both copies (seen with two QA members of one
    group: 4 of 6 results twice, 2 runs in 5; and with three routers joining over a burst of
    2,000 arrivals: 256 and 534 calls routed twice, 69 and 143 dead letters twice, in two nights).
    Aborted at the revoke, after Faust waited for the agents and flushed, the outputs go with the
    offsets that were not committed either; the events are processed again once, by whichever
    member gets the partition. Each transaction once: partition p of every input shares one.
    Every revoked partition's, not only the inputs': Faust begins one for its assignor's leader
    topic at each assignment too, never used, and left open it failed the next begin with the
    same warning (IN_TRANSACTION -> IN_TRANSACTION, at every rebalance of every night).
    """

    @app.on_partitions_revoked.connect
    async def _abort_revoked(sender: object, revoked: set, **_: object) -> None:
        producers = getattr(app.producer, "_transaction_producers", {})
        lost = {_transactional_id(app, tp.topic, tp.partition) for tp in revoked}
        async with _gate(app):  # not inside a commit that already took these partitions' offsets
            for transactional_id in sorted(lost & set(producers)):
                await app.producer.abort_transaction(transactional_id)


def _gate(app: faust.App) -> asyncio.Lock:
    consumer = app.consumer
    if not isinstance(consumer, GatedConsumer):
        raise TypeError(f"the app's consumer is {type(consumer).__name__}, not GatedConsumer")
    return consumer.commit_gate


def _transactional_id(app: faust.App, topic: str, partition: int) -> str:
    group = app.assignor.group_for_topic(topic)
    return app.consumer.transactions.transactional_id_format.format(
        tpg=TopicPartitionGroup(topic, partition, group), group_id=app.conf.id)


Send = tuple[str, bytes | None, bytes, int | None, list[tuple[str, bytes]] | None]  # topic, key, value, partition, headers


async def send_batch_in_source_transactions(app: faust.App, batch: list[tuple[faust.types.Message, list[Send]]],
                                            inputs: Sequence[faust.types.Message]) -> None:
    """Send the outputs of a batch, each in its source partition's transaction, wait for every
    delivery, then acknowledge every input of the batch (``inputs``, those without outputs too),
    all under the consumer's commit gate: a commit covers an output together with its input or
    neither (see :class:`GatedConsumer`).

    Faust's own ``topic.send`` picks the transaction by the *destination* partition, which is
    only right when input and output are co-partitioned with the same partitioner; the router
    chooses output partitions by load, and a SIGKILL test showed duplicates that way. Sends are
    queued in input order, so the outputs of one partition keep that order.

    Any failure stops the process before an input of the batch is acknowledged: left alone, a
    refused send (e.g. MessageSizeTooLargeError) was an unretrieved future while the input's offset
    was committed. Neither Faust's ack-and-skip nor its commit at shutdown may move past the input;
    the open transaction is aborted when the restarted stage's producer fences it (or it times out).
    """
    consumer = app.consumer
    async with _gate(app):
        pending: list[tuple[faust.types.Message, Send, Any]] = []
        current: tuple[faust.types.Message, Send] | None = None
        try:
            for source, sends in batch:
                transactional_id = _transactional_id(app, source.topic, source.partition)
                for send in sends:
                    current = (source, send)
                    topic, key, value, partition, headers = send
                    delivery = await app.producer.send(topic, key, value, partition, None, headers,
                                                       transactional_id=transactional_id)
                    pending.append((source, send, delivery))
            for source, send, delivery in pending:
                current = (source, send)
                await delivery
        except Exception as exc:  # noqa: BLE001 - any failure: no input of the batch may be committed
            source, send = current if current else (batch[0][0], ("", None, b"", None, None))
            halt(f"{type(exc).__name__}: {exc}", topic=send[0], bytes=len(send[2]), source_topic=source.topic,
                 source_partition=source.partition, source_offset=source.offset, batch_inputs=len(batch))
        for message in inputs:  # as Stream.ack does; the stream's own ack later finds it done
            if message.ack(consumer):
                app.sensors.on_message_out(message.tp, message.offset, message)


async def take_in_batches(
    stream: faust.Stream,
    max_events: int,
    within_s: float,
    handle: Callable[[asyncio.AbstractEventLoop, list[Any]], Awaitable[None]],
    stage: str,
) -> None:
    """Hand the stream's events to ``handle`` in batches (up to ``max_events`` within ``within_s``);
    a batch that raises halts the stage, as Faust would acknowledge and skip it whole."""
    loop = asyncio.get_running_loop()
    async for events in stream.take_events(max_events, within=within_s):
        try:
            await handle(loop, events)
        except Exception as exc:  # noqa: BLE001 - Faust would acknowledge and skip the whole batch
            halt(f"{stage} batch failed: {type(exc).__name__}: {exc}", inputs=len(events),
                 first=[(e.message.topic, e.message.partition, e.message.offset) for e in events[:1]])


def halt(error: str, **context: object) -> NoReturn:
    """Stop the process now, without Faust's shutdown (which acks and commits)."""
    log.error("output_send_failed", error=error, action="stage stops; the input is read again on restart",
              **context)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_SEND_FAILED)
