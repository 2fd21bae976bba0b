"""A worker takes its partitions' backlog in turns (issue 29): a partition moved to a member added
mid-night must still hold its share of the work, not be one its old owner had already drained.

The fetch settings are what decide it: with librdkafka's defaults (1 MB per partition per fetch)
one fetch holds each partition whole, so the first 150 records a worker reads are one
partition's. The test makes every partition fetchable at one instant (all paused once their
first record arrived, the backlog written, then all resumed together), so that how the broker
and client happen to start up does not decide which partitions the first fetch can hold."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.run.worker import WorkerOptions, consumer_config

pytestmark = pytest.mark.integration

PER_PARTITION = 150
RECORD = b"x" * 700  # about a routed call's size


def _write(producer: Producer, topic: str, partitions: int, rounds: int, tag: str) -> None:
    for n in range(rounds):  # as the router's burst writes: a few calls per partition per batch
        producer.begin_transaction()
        for p in range(partitions):
            for i in range(3 if rounds > 1 else 1):
                producer.produce(topic, value=RECORD, key=f"{tag}-{n}-{p}-{i}".encode(), partition=p)
        producer.commit_transaction(30)


def _read(consumer: Consumer, until: int, deadline_polls: int = 120) -> list[int]:
    order: list[int] = []
    for _ in range(deadline_polls):
        if len(order) >= until:
            break
        order.extend(m.partition() for m in consumer.consume(16, timeout=1.0) if not m.error())
    return order


def test_a_fetch_takes_a_few_records_of_each_partition_not_one_partition_whole(
        isolated_settings: Settings, unique: str) -> None:
    settings = isolated_settings
    apply_catalog(settings, load_catalog(settings.bucket_names))
    topic = settings.topic("audio.bucket.long")
    producer = Producer({**settings.kafka_common(), "transactional.id": f"fetch-router-{unique}"})
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    producer.init_transactions(30)
    consumer = Consumer(consumer_config(settings, WorkerOptions(bucket="long", instance_id=f"fetch-{unique}")))
    consumer.subscribe([topic])
    try:
        _write(producer, topic, partitions, rounds=1, tag="first")
        seen = _read(consumer, until=partitions)
        assert sorted(seen) == list(range(partitions)), seen  # every partition is being fetched
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.pause(assigned)
        _write(producer, topic, partitions, rounds=PER_PARTITION // 3, tag="backlog")
        consumer.resume(assigned)
        order = _read(consumer, until=PER_PARTITION)
    finally:
        consumer.close()
    first = order[:PER_PARTITION]
    assert len(first) == PER_PARTITION, len(first)
    assert len(set(first)) == partitions, {p: first.count(p) for p in set(first)}
    assert max(first.count(p) for p in set(first)) <= 2 * PER_PARTITION / partitions
