"""The MinIO/S3 adapter of :class:`pipeline.stages.storage.ObjectStore`.

It does not retry: every error is classified (transient :class:`StorageError`, permanent
:class:`StorageRefused` / :class:`MissingObject` / :class:`ObjectChanged`) and retried by the one retry layer,
:class:`pipeline.stages.retry.RetryingStore`.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import urllib3
from minio import Minio
from minio.error import InvalidResponseError, MinioException, S3Error, ServerError

from pipeline.config import Settings
from pipeline.events import ObjectRef
from pipeline.logs import get_logger
from pipeline.stages.retry import Backoff, RetryingStore
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectInfo, StorageError, StorageRefused

log = get_logger("callqa.storage")

_META_PREFIX = "x-amz-meta-"
_MISSING = {"NoSuchKey", "NoSuchVersion", "NoSuchBucket", "InvalidArgument"}
# S3 codes that say "try again" even when a proxy rewrites the status to a 4xx.
_BUSY = {
    "SlowDown",
    "RequestTimeout",
    "ServiceUnavailable",
    "InternalError",
    "XMinioServerNotInitialized",
    "XMinioStorageFull",
}


def storage_client(settings: Settings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key.get_secret_value(),
        secure=settings.s3_secure,
        region=settings.s3_region,
        http_client=urllib3.PoolManager(
            maxsize=16,
            timeout=urllib3.Timeout(connect=5, read=60),
            # No retries here: pipeline.stages.retry is the one retry layer (with a deadline).
            retries=urllib3.Retry(total=0, redirect=0, raise_on_status=False),
        ),
    )


def retrying_store(settings: Settings, sleep: Callable[[float], None] = time.sleep) -> RetryingStore:
    """The MinIO store behind the one retry layer, up to ``storage_retry_deadline_s``; each retry is logged."""

    def on_retry(error: BaseException, attempt: int, sleep_s: float) -> None:
        log.warning("storage_retry", error=str(error), attempt=attempt, sleep_s=round(sleep_s, 2))

    backoff = Backoff(deadline_s=settings.storage_retry_deadline_s)
    return RetryingStore(MinioStore(storage_client(settings)), backoff, sleep=sleep, on_retry=on_retry)


class MinioStore:
    """Reads objects (or byte ranges of them) from MinIO or any S3 endpoint."""

    def __init__(self, client: Minio) -> None:
        self.client = client

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        try:
            st = self.client.stat_object(ref.bucket, ref.key, version_id=ref.version_id)
        except Exception as exc:  # noqa: BLE001 - classified: transient or permanent
            raise classify("stat", ref, exc) from exc
        metadata = {
            k.lower().removeprefix(_META_PREFIX): v
            for k, v in (st.metadata or {}).items()
            if k.lower().startswith(_META_PREFIX)
        }
        return ObjectInfo(st.size or 0, (st.etag or "").strip('"') or None, st.version_id, metadata)

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        try:
            resp = self.client.get_object(
                ref.bucket,
                ref.key,
                offset=offset,
                length=length or 0,
                version_id=ref.version_id,
                # Conditional on the routed content: without versions, a key written again after
                # routing would be read under the old identity (the server checks; no race).
                request_headers={"If-Match": f'"{ref.etag.strip(chr(34))}"'} if ref.etag else None,
            )
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()
        except Exception as exc:  # noqa: BLE001 - classified: transient or permanent
            raise classify("read", ref, exc) from exc

    def put(
        self, bucket: str, key: str, data: bytes, content_type: str, metadata: dict[str, str] | None = None
    ) -> ObjectInfo:
        ref = ObjectRef(bucket=bucket, key=key)
        try:
            result = self.client.put_object(
                bucket, key, io.BytesIO(data), len(data), content_type=content_type, metadata=metadata
            )
        except Exception as exc:  # noqa: BLE001 - classified: transient or permanent
            raise classify("write", ref, exc) from exc
        return ObjectInfo(len(data), (result.etag or "").strip('"') or None, result.version_id, dict(metadata or {}))

    def put_if_match(self, ref: ObjectRef, data: bytes, content_type: str, metadata: dict[str, str]) -> ObjectInfo:
        """One PutObject request with ``If-Match: <ref.etag>``: the server writes only while the key
        holds that content (412 PreconditionFailed, :class:`ObjectChanged`, otherwise), so nothing written
        to the key after the check is overwritten. minio-py's ``put_object`` sends no request headers of
        the caller's (it would store ``If-Match`` as user metadata), so this is its single-part
        ``_put_object`` with the headers put_object would send: one request, up to S3's 5 GiB."""
        if not ref.etag:
            raise ObjectChanged(f"{ref.bucket}/{ref.key}: no etag to write against")
        headers: dict[str, str | list[str] | tuple[str]] = {
            "Content-Type": content_type,
            "If-Match": f'"{ref.etag.strip(chr(34))}"',
        }
        headers.update({f"{_META_PREFIX}{k}": v for k, v in metadata.items()})
        try:
            result = self.client._put_object(ref.bucket, ref.key, data, headers)
        except Exception as exc:  # noqa: BLE001 - classified: transient or permanent
            raise classify("write", ref, exc) from exc
        return ObjectInfo(len(data), (result.etag or "").strip('"') or None, result.version_id, dict(metadata))

    def remove_version(self, ref: ObjectRef) -> None:
        if not ref.version_id:
            raise ValueError(f"{ref.bucket}/{ref.key}: no version to remove")
        try:
            self.client.remove_object(ref.bucket, ref.key, version_id=ref.version_id)
        except Exception as exc:  # noqa: BLE001 - classified: transient or permanent
            raise classify("remove", ref, exc) from exc


def classify(action: str, ref: ObjectRef, exc: Exception) -> StorageError:
    """What a client error means for a retry: transient (5xx, connection refused or reset,
    timeouts, urllib3's MaxRetryError) is a plain :class:`StorageError`; a missing object,
    access denied or any other 4xx answer is permanent."""
    where = f"{ref.bucket}/{ref.key}" + (f" version {ref.version_id}" if ref.version_id else "")
    if isinstance(exc, S3Error):
        status = getattr(exc.response, "status", 0) or 0
        if exc.code in _MISSING:
            return MissingObject(f"{where}: {exc.code}")
        if exc.code == "PreconditionFailed" or status == 412:
            return ObjectChanged(f"{where}: stored content is no longer etag {ref.etag} (written again since)")
        if exc.code in _BUSY or status >= 500:
            return StorageError(f"{action} {where}: {exc.code} {exc.message} (HTTP {status})")
        return StorageRefused(f"{action} {where}: {exc.code} {exc.message} (HTTP {status})")
    message = f"{action} {where}: {type(exc).__name__}: {exc}"
    if isinstance(exc, ServerError):
        return StorageError(message) if exc.status_code >= 500 else StorageRefused(message)
    if isinstance(exc, InvalidResponseError):  # a non-XML answer, e.g. a proxy's HTML error page
        code = getattr(exc, "_code", 0) or 0
        return StorageError(message) if code >= 500 or code in (408, 429) else StorageRefused(message)
    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError, MinioException)):
        return StorageError(message)  # connection refused/reset, timeouts, a protocol error mid-read
    return StorageRefused(message)  # e.g. a bad header value: the same request fails the same way
