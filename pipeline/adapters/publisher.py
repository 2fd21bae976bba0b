"""The upstream side: upload recordings (MinIO then emits the arrival), or publish the
plain arrival event for objects an upstream system stored itself.

Published arrivals use key ``bucket/object`` and MinIO's own partitioner (FNV-1a,
as its Kafka client uses), so both paths for one object meet on one partition and
the router's de-duplication table sees them together. Which files are recordings and
what they are named is :mod:`pipeline.adapters.recordings` (no Kafka or MinIO client there).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from confluent_kafka import Producer
from minio import Minio
from minio.error import S3Error

from pipeline.adapters.file_store import file_digest
from pipeline.adapters.recordings import Recording
from pipeline.config import Settings
from pipeline.events import AudioArrived, ObjectRef, encode

DIGEST_META = "content-sha256"


def sarama_partition(key: bytes, partitions: int) -> int:
    """The partition MinIO's Kafka client (sarama's hash partitioner) picks for ``key``."""
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h  # Go: int32(sum) % n, negated when negative
    return abs(signed) % partitions


def arrival_key(ref: ObjectRef) -> bytes:
    return f"{ref.bucket}/{ref.key}".encode()


class ArrivalPublisher:
    """Publish plain AudioArrived events (for systems that write storage themselves)."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.arrivals
        self.producer = Producer({**settings.kafka_common(), "enable.idempotence": True, "linger.ms": 5})
        metadata = self.producer.list_topics(self.topic, timeout=30)
        self.partitions = len(metadata.topics[self.topic].partitions)
        self._errors: list[str] = []

    def publish(self, ref: ObjectRef, metadata: dict[str, str] | None = None,
                content_type: str | None = None) -> None:
        key = arrival_key(ref)
        event = AudioArrived(object=ref, metadata=metadata or {}, content_type=content_type)
        self.producer.produce(self.topic, key=key, value=encode(event),
                              partition=sarama_partition(key, self.partitions), on_delivery=self._delivered)
        self.producer.poll(0)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self._errors.append(f"{msg.key()!r}: {err}")

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every event; raise on the first delivery error (nothing silently lost)."""
        left = self.producer.flush(timeout_s)
        if self._errors or left:
            raise RuntimeError(f"arrivals not delivered: {self._errors[:3]} ({left} still queued)")


def upload(client: Minio, bucket: str, recording: Recording) -> str:
    """Upload one recording unless the same bytes are already stored. Returns "uploaded" or "unchanged"."""
    digest = file_digest(recording.path)
    try:
        stat = client.stat_object(bucket, recording.key)
        if (stat.metadata or {}).get(f"x-amz-meta-{DIGEST_META}") == digest:
            return "unchanged"
    except S3Error as exc:
        if exc.code not in ("NoSuchKey", "NoSuchObject"):
            raise
    content_type = mimetypes.guess_type(recording.path.name)[0] or "application/octet-stream"
    client.fput_object(bucket, recording.key, str(recording.path), content_type=content_type,
                       metadata={**recording.metadata, DIGEST_META: digest}, part_size=64 * 1024 * 1024)
    return "uploaded"


def upload_all(client: Minio, bucket: str, recordings: list[Recording], workers: int = 8,
               on_done: Callable[[Recording, str], None] = lambda r, s: None) -> dict[str, int]:
    """Concurrent uploads; failures are counted and reported, never silently dropped."""
    counts = {"uploaded": 0, "unchanged": 0, "failed": 0}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(upload, client, bucket, r): r for r in recordings}
        for future in as_completed(futures):
            try:
                status = future.result()
            except Exception as exc:  # noqa: BLE001 - reported per file, the rest go on
                status = f"failed: {exc}"
            counts[status if status in counts else "failed"] += 1
            on_done(futures[future], status)
    return counts
