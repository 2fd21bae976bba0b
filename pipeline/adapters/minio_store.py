"""The MinIO/S3 adapter of :class:`pipeline.stages.storage.ObjectStore`."""

from __future__ import annotations

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from pipeline.config import Settings
from pipeline.events import ObjectRef
from pipeline.stages.storage import MissingObject, ObjectInfo, StorageError

_META_PREFIX = "x-amz-meta-"
_MISSING = {"NoSuchKey", "NoSuchVersion", "NoSuchBucket", "InvalidArgument"}


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
            retries=urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
        ),
    )


class MinioStore:
    """Reads objects (or byte ranges of them) from MinIO or any S3 endpoint."""

    def __init__(self, client: Minio) -> None:
        self.client = client

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        try:
            st = self.client.stat_object(ref.bucket, ref.key, version_id=ref.version_id)
        except S3Error as exc:
            raise _storage_error(ref, exc) from exc
        except (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            # ServerError, InvalidResponseError (a proxy's HTML page), a bad header value
            raise StorageError(f"stat {ref.bucket}/{ref.key}: {type(exc).__name__}: {exc}") from exc
        metadata = {
            k.lower().removeprefix(_META_PREFIX): v
            for k, v in (st.metadata or {}).items()
            if k.lower().startswith(_META_PREFIX)
        }
        return ObjectInfo(st.size or 0, (st.etag or "").strip('"') or None, st.version_id, metadata)

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        try:
            resp = self.client.get_object(
                ref.bucket, ref.key, offset=offset, length=length or 0, version_id=ref.version_id
            )
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()
        except S3Error as exc:
            raise _storage_error(ref, exc) from exc
        except (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise StorageError(f"read {ref.bucket}/{ref.key}: {type(exc).__name__}: {exc}") from exc


def _storage_error(ref: ObjectRef, exc: S3Error) -> StorageError:
    where = f"{ref.bucket}/{ref.key}" + (f" version {ref.version_id}" if ref.version_id else "")
    if exc.code in _MISSING:
        return MissingObject(f"{where}: {exc.code}")
    return StorageError(f"{where}: {exc.code} {exc.message}")
