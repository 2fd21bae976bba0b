"""A MinIO server built once from the Go module proxy, with its Kafka notification target.

Each object created in the recordings bucket makes MinIO itself publish its event
record onto ``audio.arrivals``; while Kafka is down MinIO queues events on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import urllib3
from minio import Minio
from minio.error import MinioException
from minio.notificationconfig import NotificationConfig, QueueConfig
from minio.versioningconfig import ENABLED, VersioningConfig

from pipeline.stack.processes import go_binary, start_detached, wait_until

# The last commit of the (now unmaintained) upstream module; built with `go install`.
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
TARGET_ID = "CALLQA"
NOTIFY_ARN = f"arn:minio:sqs::{TARGET_ID}:kafka"


def ensure_binary(cache_dir: Path) -> Path:
    return go_binary(cache_dir, "minio", "github.com/minio/minio", MINIO_VERSION)


def _s3_answers(port: int, access_key: str, secret_key: str) -> bool:
    """An S3 call of the root user succeeds: the readiness that counts here. MinIO's own
    /minio/health/ready says 200 before its object layer exists (S3 calls then fail with "server
    not initialized"); held by sync boot, an S3 call is answered only once the Kafka target is
    registered and the buckets' notification rules are loaded."""
    http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=2, read=30), retries=urllib3.Retry(total=0))
    client = Minio(f"127.0.0.1:{port}", access_key, secret_key, secure=False, region="us-east-1", http_client=http)
    try:
        client.list_buckets()
        return True
    except (MinioException, urllib3.exceptions.HTTPError, OSError):
        return False  # not listening yet, or "server not initialized" before the S3 hold begins
    finally:
        http.clear()


def start(
    binary: Path, home: Path, port: int, console_port: int, access_key: str, secret_key: str,
    kafka_bootstrap: str, arrivals_topic: str, on_started: Callable[[int], None] = lambda pid: None,
) -> int:
    env = {
        "MINIO_ROOT_USER": access_key,
        "MINIO_ROOT_PASSWORD": secret_key,
        "MINIO_BROWSER": "off",
        "MINIO_UPDATE": "off",
        f"MINIO_NOTIFY_KAFKA_ENABLE_{TARGET_ID}": "on",
        f"MINIO_NOTIFY_KAFKA_BROKERS_{TARGET_ID}": kafka_bootstrap,
        f"MINIO_NOTIFY_KAFKA_TOPIC_{TARGET_ID}": arrivals_topic,
        # Buffer events on disk while Kafka is unreachable instead of dropping them.
        f"MINIO_NOTIFY_KAFKA_QUEUE_DIR_{TARGET_ID}": str(home / "notify-queue"),
        # MinIO answers /minio/health/ready, and S3 calls, before a background task has registered
        # the Kafka target and loaded each bucket's notification rules: a notification set then is
        # refused (ARN not found), and an object put then publishes no event. Sync boot holds S3
        # calls until that task is done.
        "MINIO_SYNC_BOOT": "on",
    }
    (home / "notify-queue").mkdir(parents=True, exist_ok=True)
    log = home / "server.log"
    pid = start_detached(
        [str(binary), "server", str(home / "data"), "--address", f"127.0.0.1:{port}",
         "--console-address", f"127.0.0.1:{console_port}", "--quiet"],
        log, env,
    )
    on_started(pid)  # recorded before the wait: a server that never gets ready can still be stopped
    wait_until(lambda: _s3_answers(port, access_key, secret_key), "MinIO (S3 API, Kafka notification target)",
               timeout_s=60, pid=pid, log=log)
    return pid


def prepare_copies_bucket(client: Minio, bucket: str) -> None:
    """Create the redacted copies' bucket (idempotent): versioned, and with no notification, so a
    copy never arrives as a call."""
    if not client.bucket_exists(bucket):
        client.make_bucket(bucket)
    client.set_bucket_versioning(bucket, VersioningConfig(ENABLED))


def prepare_bucket(client: Minio, bucket: str) -> None:
    """Create the recordings bucket with versioning and the Kafka notification (idempotent)."""
    if not client.bucket_exists(bucket):
        client.make_bucket(bucket)
    client.set_bucket_versioning(bucket, VersioningConfig(ENABLED))
    client.set_bucket_notification(
        bucket,
        NotificationConfig(queue_config_list=[QueueConfig(queue=NOTIFY_ARN, events=["s3:ObjectCreated:*"])]),
    )
