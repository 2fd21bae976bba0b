"""Test-side Kafka helpers: produce and read back with a real broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from pipeline.config import Settings


def produce(settings: Settings, topic: str, items: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer(settings.kafka_common())
    for key, value in items:
        producer.produce(settings.topic(topic), value=value, key=key)
    assert producer.flush(30) == 0, "messages not delivered"


def consume(
    settings: Settings, topic: str, want: int, timeout_s: float = 60.0,
    keep: Callable[[Message], bool] = lambda m: True, settle_s: float = 0.0,
) -> list[Message]:
    """Read committed messages from the beginning until ``want`` kept ones arrived (then
    keep reading ``settle_s`` more seconds, to catch duplicates) or the timeout passes."""
    consumer = Consumer({
        **settings.kafka_common(), "group.id": f"test-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed",
    })
    consumer.subscribe([settings.topic(topic)])
    found: list[Message] = []
    deadline = time.monotonic() + timeout_s
    settle_until = None
    try:
        while time.monotonic() < deadline:
            if settle_until is not None and time.monotonic() > settle_until:
                break
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if keep(msg):
                found.append(msg)
                if len(found) >= want and settle_until is None:
                    settle_until = time.monotonic() + settle_s
    finally:
        consumer.close()
    return found


class TopicReader:
    """A long-lived read_committed consumer over several topics, from the beginning."""

    def __init__(self, settings: Settings, topics: list[str]) -> None:
        self.consumer = Consumer({
            **settings.kafka_common(), "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed",
        })
        self.consumer.subscribe([settings.topic(t) for t in topics])
        self.messages: list[Message] = []

    def poll(self, seconds: float) -> list[Message]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is not None and not msg.error():
                self.messages.append(msg)
        return self.messages

    def wait_for(self, count: Callable[[list[Message]], int], want: int, timeout_s: float,
                 settle_s: float = 5.0) -> list[Message]:
        """Poll until ``count(messages) >= want`` (or the timeout), then ``settle_s`` more to catch extras."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and count(self.messages) < want:
            self.poll(0.5)
        return self.poll(settle_s)

    def close(self) -> None:
        self.consumer.close()


def commit(settings: Settings, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({**settings.kafka_common(), "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 60
    try:
        while True:  # on a fresh cluster the group coordinator takes a moment
            try:
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
    finally:
        consumer.close()
