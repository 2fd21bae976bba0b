"""A worker takes its partitions' backlog in turns (issue 29): a partition moved to a member added
mid-night must still hold its share of the work, not be one its old owner had already drained."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.run.worker import WorkerOptions, consumer_config

pytestmark = pytest.mark.integration

PER_PARTITION = 150
RECORD = b"x" * 700  # about a routed call's size


def test_the_first_records_a_worker_reads_come_from_all_its_partitions(
        isolated_settings: Settings, unique: str) -> None:
    settings = isolated_settings
    apply_catalog(settings, load_catalog(settings.bucket_names))
    topic = settings.topic("audio.bucket.long")
    producer = Producer({**settings.kafka_common(), "transactional.id": f"fetch-router-{unique}"})
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    producer.init_transactions(30)
    for n in range(PER_PARTITION // 3):  # as the router's burst writes: a few calls per partition per batch
        producer.begin_transaction()
        for p in range(partitions):
            for i in range(3):
                producer.produce(topic, value=RECORD, key=f"{n}-{p}-{i}".encode(), partition=p)
        producer.commit_transaction(30)
    consumer = Consumer(consumer_config(settings, WorkerOptions(bucket="long", instance_id=f"fetch-{unique}")))
    consumer.subscribe([topic])
    order: list[int] = []
    try:
        while len(order) < PER_PARTITION:
            order.extend(m.partition() for m in consumer.consume(16, timeout=1.0) if not m.error())
    finally:
        consumer.close()
    # librdkafka's defaults fetch each partition whole: the first 150 records are one partition's
    first = order[:PER_PARTITION]
    assert len(set(first)) == partitions, {p: first.count(p) for p in set(first)}
    assert max(first.count(p) for p in set(first)) <= 2 * PER_PARTITION / partitions
