"""Thin adapter over the Kafka AdminClient: read the live topics, apply catalog changes."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from pipeline.catalog import LiveTopic, TopicChange, TopicSpec, plan_changes
from pipeline.config import Settings
from pipeline.errors import StackError

TIMEOUT_S = 30.0


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(settings.kafka_common())


def wait_for_broker(settings: Settings, timeout_s: float = 60.0) -> None:
    """Poll the cluster metadata until a broker answers (readiness, not a sleep)."""
    admin = admin_client(settings)
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except KafkaException as exc:
            last = exc
        time.sleep(0.2)
    raise StackError(f"no Kafka broker answered at {settings.kafka_bootstrap} in {timeout_s:.0f}s: {last}")


def live_topics(admin: AdminClient, names: list[str]) -> dict[str, LiveTopic]:
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    present = [n for n in names if n in metadata.topics and metadata.topics[n].error is None]
    configs: dict[str, dict[str, str]] = {}
    if present:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in present])
        for resource, future in futures.items():
            entries = future.result(timeout=TIMEOUT_S)
            configs[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    live = {}
    for name in present:
        parts = metadata.topics[name].partitions
        replication = len(next(iter(parts.values())).replicas) if parts else 0
        live[name] = LiveTopic(partitions=len(parts), replication_factor=replication, config=configs[name])
    return live


def plan_catalog(settings: Settings, specs: list[TopicSpec]) -> list[TopicChange]:
    """Every difference between the cluster and the catalog; nothing is changed."""
    admin = admin_client(settings)
    return plan_changes(specs, live_topics(admin, [settings.topic(s.name) for s in specs]), settings.topic_prefix)


def apply_catalog(settings: Settings, specs: list[TopicSpec]) -> list[TopicChange]:
    """Make the cluster match the catalog; return every difference found (applied or not)."""
    admin = admin_client(settings)
    by_topic = {settings.topic(s.name): s for s in specs}
    changes = plan_changes(specs, live_topics(admin, list(by_topic)), settings.topic_prefix)
    _run(admin.create_topics, [
        NewTopic(c.topic, by_topic[c.topic].partitions, by_topic[c.topic].replication_factor,
                 config=by_topic[c.topic].config)
        for c in changes if c.action == "create"
    ])
    _run(admin.create_partitions, [
        NewPartitions(c.topic, c.detail["to"]) for c in changes if c.action == "add_partitions"
    ])
    _run(admin.incremental_alter_configs, [
        ConfigResource(ResourceType.TOPIC, c.topic, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in c.detail["set"].items()
        ])
        for c in changes if c.action == "alter_config"
    ])
    grown = {c.topic: by_topic[c.topic].partitions for c in changes if c.action in ("create", "add_partitions")}
    if grown:
        _wait_partitions(admin, grown)
    return changes


def _run(call: Any, items: list[Any]) -> None:
    if not items:
        return
    for name, future in call(items, request_timeout=TIMEOUT_S).items():
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise StackError(f"{call.__name__} failed for {name}: {exc}") from exc


def _wait_partitions(admin: AdminClient, want: dict[str, int], timeout_s: float = 30.0) -> None:
    """Creating topics and partitions is asynchronous: wait until the metadata shows every
    partition with a leader, so the next apply (or producer) sees the new state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=5).topics
        if all(n in topics and len(topics[n].partitions) >= count and
               all(p.leader >= 0 for p in topics[n].partitions.values()) for n, count in want.items()):
            return
        time.sleep(0.1)
    raise StackError(f"topics not ready after {timeout_s:.0f}s: {sorted(want)}")


def describe(settings: Settings, specs: list[TopicSpec]) -> list[dict[str, Any]]:
    """Each catalog topic with its live state beside it."""
    admin = admin_client(settings)
    names = [settings.topic(s.name) for s in specs]
    live = live_topics(admin, names)
    rows = []
    for spec, name in zip(specs, names):
        current = live.get(name)
        rows.append({
            "topic": name,
            "catalog": {"partitions": spec.partitions, "replication_factor": spec.replication_factor,
                        "config": spec.config},
            "live": None if current is None else {
                "partitions": current.partitions, "replication_factor": current.replication_factor,
                "config": {k: current.config.get(k) for k in spec.config},
            },
            "in_sync": current is not None and not plan_changes([spec], {name: current}, settings.topic_prefix),
        })
    return rows
