"""Kafka reads that a busy or fresh cluster answers with a retriable error for a moment.

A topic just created, or a broker under load, answers ListOffsets with NOT_LEADER_FOR_PARTITION
or LEADER_NOT_AVAILABLE until the partition's leadership reaches the client's metadata; a fresh
cluster answers committed-offset reads with NOT_COORDINATOR while it elects the group's
coordinator; a broker just restarted answers with leader-epoch errors. Each is retried to a
deadline, then raised as a StackError that names the read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pipeline.errors import StackError

T = TypeVar("T")
TIMEOUT_S = 30.0
_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # a broker just restarted answers ListOffsets with these until its leader epochs settle
    # (`callqa lag` in a simulated night's broker restart: "Leader epoch is newer than broker epoch")
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
}


def retrying(read: Callable[[], T], what: str, timeout_s: float = TIMEOUT_S, pause_s: float = 0.5) -> T:
    """``read()``, again while it raises a retriable Kafka error and ``timeout_s`` has not passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return read()
        except KafkaException as exc:
            err = exc.args[0]
            moving = isinstance(err, KafkaError) and (err.retriable() or err.code() in _MOVING)
            if not moving or time.monotonic() > deadline:
                raise StackError(f"cannot read {what}: {exc}") from exc
            time.sleep(pause_s)


def end_offset(consumer: Consumer, topic: str, partition: int, timeout_s: float = TIMEOUT_S) -> int:
    """The partition's high watermark (its end offset)."""
    tp = TopicPartition(topic, partition)
    return retrying(
        lambda: consumer.get_watermark_offsets(tp, timeout=timeout_s)[1],
        f"the end offset of {topic}[{partition}]",
        timeout_s,
    )
