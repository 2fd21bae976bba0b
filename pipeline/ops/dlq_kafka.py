"""Read dead-letter topics and carry out a redrive plan, atomically per letter set.

The DLQs are small (one partition, a night's failures), so listing reads them whole. The
redrives, parked letters and the handled markers are written in one Kafka transaction: a
crash leaves either all of them or none.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import DecodeError, StackError
from pipeline.events import DeadLetter, decode, encode
from pipeline.ops.dlq import RETRY_TOPICS, Action, StoredLetter
from pipeline.runtime.kafka_retry import end_offset
from pipeline.stages.sizes import MessageLimits

DLQ_TOPICS = ("router.dlq", "asr.dlq", "qa.dlq", "redact.dlq")


def _read_all(settings: Settings, topic: str, timeout_s: float = 60.0):
    consumer = Consumer({**settings.kafka_common(), "group.id": f"callqa-ops-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None:
            raise StackError(f"topic {topic} not found (run: callqa topics apply)")
        parts = [p for p in meta.partitions if end_offset(consumer, topic, p) > 0]
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        todo, deadline = set(parts), time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    todo.discard(msg.partition())
                continue
            yield msg
    finally:
        consumer.close()


def handled_markers(settings: Settings) -> dict[str, str]:
    return {m.key().decode(): m.value().decode() for m in _read_all(settings, settings.topic("dlq.handled"))
            if m.key() and m.value() is not None}


def read_letters(settings: Settings, stages: tuple[str, ...] = ("router", "asr", "qa", "redact")) -> list[StoredLetter]:
    handled = handled_markers(settings)
    letters = []
    for name in DLQ_TOPICS:
        if name.split(".")[0] not in stages:
            continue
        for msg in _read_all(settings, settings.topic(name)):
            try:
                letter = decode(msg.value(), DeadLetter)
            except DecodeError:
                continue  # not a letter (written by hand?): nothing to redrive
            stored = StoredLetter(msg.topic(), msg.partition(), msg.offset(), letter)
            letters.append(StoredLetter(stored.topic, stored.partition, stored.offset, letter, handled.get(stored.id)))
    return letters


def execute(settings: Settings, actions: list[Action]) -> None:
    todo = [a for a in actions if a.kind in ("redrive", "park")]
    if not todo:
        return
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    largest = limits.producer_max_bytes([*RETRY_TOPICS.values(), "dlq.parked"])  # a transcript is up to 8 MiB
    producer = Producer({**settings.kafka_common(), "transactional.id": settings.topic("callqa-dlq-redrive"),
                         "enable.idempotence": True, "message.max.bytes": largest})
    producer.init_transactions(30)
    producer.begin_transaction()
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for action in todo:
        letter = action.stored.letter
        key = letter.original_key.encode() if letter.original_key else None
        if action.kind == "redrive":  # to the stage's retry topic: see pipeline.ops.dlq
            target = settings.topic(action.topic or "")
            if action.partition is None:
                producer.produce(target, letter.original_payload, key, headers=action.headers)
            else:
                producer.produce(target, letter.original_payload, key, partition=action.partition,
                                 headers=action.headers)
        else:
            producer.produce(settings.topic("dlq.parked"), encode(letter), key)
        producer.produce(settings.topic("dlq.handled"), f"{action.kind} {now}".encode(), action.stored.id.encode())
    producer.commit_transaction(60)  # raises when any record above was refused: then nothing is marked
