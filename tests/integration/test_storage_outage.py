"""A MinIO outage in the middle of a run (issue 10 item 4): nothing is lost, doubled or dead-lettered.

The router's probes and the worker's fetches both meet the outage: calls of the first
half are routed before it (the worker is not started yet), arrivals of the second half
wait in Kafka with the router stopped. Then MinIO stops, router and worker start, both
retry (their logs say ``storage_retry``), and after 30 s MinIO comes back on the same port
and data directory.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from pipeline import stack
from pipeline.config import Settings
from tests.integration.test_pipeline import LINES, transcripts, wait_transcripts, write_call
from tests.kafka_helpers import TopicReader
from tests.processes import callqa, spawn, stop, wait_for_line

pytestmark = pytest.mark.integration

OUTAGE_S = 30.0


def arrivals_of(settings: Settings, want: int, timeout_s: float = 60) -> int:
    """How many arrivals of this test's bucket MinIO has published (waits for ``want``)."""
    consumer = Consumer({**settings.kafka_common(), "group.id": f"test-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([settings.arrivals])
    seen, deadline = 0, time.monotonic() + timeout_s
    try:
        while seen < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and (msg.key() or b"").startswith(
                    settings.recordings_bucket.encode() + b"/"):
                seen += 1
    finally:
        consumer.close()
    return seen


def test_storage_outage_mid_run_loses_doubles_and_dead_letters_nothing(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    folder = tmp_path / "calls"
    folder.mkdir()
    calls = [write_call(folder / f"outage-{i}", "pcm16k", *LINES[i]) for i in range(5)]
    first, second = calls[:3], calls[3:]
    reader = TopicReader(settings, ["asr.transcripts", "audio.bucket.short", "router.dlq", "asr.dlq"])
    procs = []

    def start(name: str, *args: str):  # noqa: ANN202
        procs.append(spawn(settings, tmp_path / f"{name}.log", *args, asr_threads="1"))
        return procs[-1]

    started = time.monotonic()
    try:
        router = start("router-1", "router", "--app-id", f"router-{unique}")
        assert callqa(settings, "ingest", *map(str, first)).returncode == 0
        reader.wait_for(lambda ms: sum(m.topic().endswith("audio.bucket.short") for m in ms), 3, 180, settle_s=0)
        stop(router)
        assert callqa(settings, "ingest", *map(str, second)).returncode == 0
        assert arrivals_of(settings, len(calls)) == len(calls)  # the second half waits in Kafka

        stack.stop_minio(settings)
        down_at = time.monotonic()
        try:
            start("router-2", "router", "--app-id", f"router-{unique}")
            start("worker", "worker", "--bucket", "short", "--device", "cpu", "--instance-id", f"w-{unique}",
                  "--max-calls", "1")
            for name in ("router-2", "worker"):  # both meet the outage and wait it out
                assert wait_for_line(tmp_path / f"{name}.log", "storage_retry", 120), name
            time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
        finally:
            stack.start_minio(settings)
        outage_s = time.monotonic() - down_at

        got = wait_transcripts(reader, len(calls), timeout_s=600, settle_s=10)
        counts = Counter(t.call_id for t in got)
        assert sorted(counts) == sorted(p.stem for p in calls), counts
        assert max(counts.values()) == 1, counts
        # the test stack is shared: count only letters about this test's calls
        letters = [m for m in reader.messages if m.topic().endswith(".dlq")
                   and b"outage-" in (m.key() or b"") + (m.value() or b"")]
        assert letters == [], [m.value() for m in letters]
        assert len(transcripts(reader)) == len(calls)
        print(f"storage outage {outage_s:.1f} s; run {time.monotonic() - started:.1f} s")
    finally:
        for proc in procs:
            stop(proc)
        reader.close()
