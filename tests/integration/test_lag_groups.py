"""`callqa lag` on real Kafka: any group (`--group`), and a partition held back by an open transaction."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from pipeline.config import Settings
from pipeline.ops.lag import exit_code
from tests.kafka_helpers import commit, produce
from tests.processes import callqa

pytestmark = pytest.mark.integration


def lag(settings: Settings, *args: str) -> dict:
    result = callqa(settings, "lag", "--json", "--sample-s", "0", *args)
    assert result.stdout, result.stderr
    data = json.loads(result.stdout)
    assert result.returncode == exit_code(s["status"] for s in data["stages"]), result.stdout + result.stderr
    return data


def transactional(settings: Settings) -> Producer:
    producer = Producer(
        {
            **settings.kafka_common(),
            "transactional.id": f"test-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 120000,
        }
    )
    producer.init_transactions(30)
    return producer


def test_lag_shows_a_replay_group_by_name(settings: Settings, unique: str) -> None:
    topic = settings.topic("audio.bucket.short")
    produce(settings, "audio.bucket.short", [(b"k", b"{}")] * 3)  # 3 records, partition by key
    group = f"replay-{unique}"
    commit(settings, group, {(topic, p): 0 for p in range(6)})
    for args in (["--group", group], ["--group", f"asr-short={group}"]):
        data = lag(settings, *args)
        rows = [s for s in data["stages"] if s["group"] == group]
        assert [(r["stage"], r["messages"]) for r in rows] == [("asr-short", 3)], data["stages"]
        assert any(s["group"] == settings.topic("asr-short") for s in data["stages"])  # the live group too
    unknown = callqa(settings, "lag", "--json", "--sample-s", "0", "--group", f"nobody-{unique}")
    assert unknown.returncode != 0 and "no committed offsets" in unknown.stderr


def test_a_partition_held_by_an_open_transaction_is_stalled_not_done(settings: Settings, unique: str) -> None:
    topic, group = settings.topic("asr.transcripts"), f"qa-{unique}"
    producer = transactional(settings)
    producer.begin_transaction()
    producer.produce(topic, b"{}", b"c1", partition=0)
    producer.commit_transaction(30)
    commit(settings, group, {(topic, p): (2 if p == 0 else 0) for p in range(6)})  # record + commit marker
    before = lag(settings, "--qa-group", group, "--transaction-timeout-s", "2")
    assert next(s for s in before["stages"] if s["stage"] == "qa")["status"] == "done"

    producer.begin_transaction()  # left open: the last stable offset stays at 2
    producer.produce(topic, b"{}", b"c2", partition=0)
    producer.flush(30)
    try:
        time.sleep(3)
        held = lag(settings, "--qa-group", group, "--transaction-timeout-s", "2")
        qa = next(s for s in held["stages"] if s["stage"] == "qa")
        assert qa["status"] == "stalled", qa
        stalled = callqa(settings, "lag", "--json", "--sample-s", "0", "--qa-group", group, "--transaction-timeout-s", "2")
        assert stalled.returncode == 2  # the worst verdict: a stalled stage pages
        part = next(p for p in held["partitions"] if p["stage"] == "qa" and p["partition"] == 0)
        assert part["messages"] == 0 and part["held_s"] >= 2
        young = lag(settings, "--qa-group", group, "--transaction-timeout-s", "600")  # still within its timeout
        assert next(s for s in young["stages"] if s["stage"] == "qa")["status"] == "done"
    finally:
        producer.abort_transaction(30)
