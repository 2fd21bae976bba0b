"""Kafka side of replays: offsets by time, group state, committing offsets, re-sending arrivals
(where a bounded replay's group stands, read by the running stage: :mod:`pipeline.runtime.replay_watch`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from pipeline.config import Settings
from pipeline.errors import StackError
from pipeline.headers import REPLAY_GENERATION
from pipeline.runtime.kafka_retry import end_offset
from pipeline.runtime.lag_kafka import OffsetsReader
from pipeline.ops.replay import TP, OffsetMove


def _consumer(settings: Settings, group: str | None = None) -> Consumer:
    return Consumer({**settings.kafka_common(), "group.id": group or f"callqa-ops-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "enable.partition.eof": True})


def offsets_at(settings: Settings, tps: list[TP], when: datetime) -> dict[TP, int]:
    """The first offset at or after ``when`` per partition (the end offset where nothing is that late)."""
    consumer = _consumer(settings)
    try:
        ms = int(when.timestamp() * 1000)
        found = consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in tps], timeout=30)
        out = {}
        for tp in found:
            if tp.offset < 0:  # no record that late: the end
                tp.offset = end_offset(consumer, tp.topic, tp.partition)
            out[(tp.topic, tp.partition)] = tp.offset
        return out
    finally:
        consumer.close()


def positions(settings: Settings, group: str, tps: list[TP]) -> tuple[dict[TP, int | None], dict[TP, tuple[int, int]]]:
    reader = OffsetsReader(settings)
    try:
        return reader.committed(group, tps), reader.watermarks(tps)
    finally:
        reader.close()


def partitions_of(settings: Settings, topic: str, only: Iterable[int] | None = None) -> list[TP]:
    reader = OffsetsReader(settings)
    try:
        available = reader.partitions(topic)
    finally:
        reader.close()
    chosen = sorted(set(only)) if only else available
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise StackError(f"{topic} has no partition(s) {unknown} (it has {len(available)})")
    return [(topic, p) for p in chosen]


class GroupActive(StackError):
    """The group has members: offsets of a running group cannot be moved."""


def commit_offsets(settings: Settings, group: str, moves: list[OffsetMove]) -> None:
    """Commit as a non-member. The broker accepts that only while the group has no members, so a
    running group is refused there, atomically, rather than by a check that could race a start.
    (AdminClient.describe_consumer_groups timed out here, confluent-kafka 2.16.1 on Kafka 4.1.)"""
    consumer = _consumer(settings, group)
    try:
        consumer.commit(offsets=[TopicPartition(m.topic, m.partition, m.target) for m in moves], asynchronous=False)
    except KafkaException as exc:
        raise GroupActive(f"group {group} refused the new offsets ({exc.args[0].name()}): "
                          "stop its consumers first; a stopped worker (static member) leaves the group "
                          "when its session times out (15 s by default)") from exc
    finally:
        consumer.close()


@dataclass(frozen=True)
class Rerouted:
    sent: int
    left: dict[TP, tuple[int, int]]  # not reached before the time limit: (next offset, stop) per partition

    @property
    def left_count(self) -> int:
        """Offsets not reached (records, and any transaction markers among them)."""
        return sum(stop - nxt for nxt, stop in self.left.values())


def reroute(settings: Settings, tps: list[TP], start: dict[TP, int], stop: dict[TP, int], generation: int,
            time_limit_s: float = 300.0) -> Rerouted:
    """Send the arrivals in [start, stop) again, to the same partition, tagged with the generation,
    for at most ``time_limit_s``; what it did not reach is reported, not passed over."""
    consumer = _consumer(settings)
    producer = Producer({**settings.kafka_common(), "enable.idempotence": True})
    todo = {tp for tp in tps if start[tp] < stop[tp]}
    consumer.assign([TopicPartition(t, p, start[(t, p)]) for t, p in todo])
    following = {tp: start[tp] for tp in todo}  # the next offset to re-send
    sent, deadline = 0, time.monotonic() + time_limit_s
    try:
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    todo.discard(tp)
                continue
            if tp not in todo or msg.offset() >= stop[tp]:
                todo.discard(tp)
                continue
            following[tp] = msg.offset() + 1
            headers = [(k, v) for k, v in (msg.headers() or []) if k != REPLAY_GENERATION]
            producer.produce(msg.topic(), msg.value(), msg.key(), partition=msg.partition(),
                             headers=[*headers, (REPLAY_GENERATION, str(generation).encode())])
            sent += 1
            producer.poll(0)
        if producer.flush(60):
            raise StackError("re-routed arrivals were not all delivered")
        return Rerouted(sent, {tp: (following[tp], stop[tp]) for tp in sorted(todo)})
    finally:
        consumer.close()
