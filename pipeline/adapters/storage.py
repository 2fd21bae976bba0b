"""Object storage adapters behind one small protocol: MinIO/S3, or local files (embedded mode)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from pipeline.config import Settings
from pipeline.errors import CallQAError
from pipeline.events import ObjectRef

_META_PREFIX = "x-amz-meta-"
_MISSING = {"NoSuchKey", "NoSuchVersion", "NoSuchBucket", "InvalidArgument"}


class StorageError(CallQAError):
    """Storage could not be reached or answered with an error; worth retrying."""


class MissingObject(StorageError):
    """The object (or that version of it) does not exist; retrying will not help."""


@dataclass(frozen=True)
class ObjectInfo:
    size_bytes: int
    etag: str | None
    version_id: str | None
    metadata: dict[str, str]


class ObjectStore(Protocol):
    def stat(self, ref: ObjectRef) -> ObjectInfo: ...

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes: ...


def storage_client(settings: Settings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key.get_secret_value(),
        secure=settings.s3_secure,
        region=settings.s3_region,
        http_client=urllib3.PoolManager(
            maxsize=16, timeout=urllib3.Timeout(connect=5, read=60),
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
            for k, v in (st.metadata or {}).items() if k.lower().startswith(_META_PREFIX)
        }
        return ObjectInfo(st.size or 0, (st.etag or "").strip('"') or None, st.version_id, metadata)

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        try:
            resp = self.client.get_object(ref.bucket, ref.key, offset=offset, length=length or 0,
                                          version_id=ref.version_id)
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


class FileStore:
    """Local files as objects (embedded mode): bucket ``file``, key = the path."""

    BUCKET = "file"

    @staticmethod
    def ref_for(path: Path) -> ObjectRef:
        return ObjectRef(bucket=FileStore.BUCKET, key=str(path.resolve()))

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        path = Path(ref.key)
        try:
            size = path.stat().st_size
        except FileNotFoundError as exc:
            raise MissingObject(f"{path}: no such file") from exc
        return ObjectInfo(size, file_digest(path), None, {})

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        try:
            with open(ref.key, "rb") as f:
                f.seek(offset)
                return f.read(-1 if length is None else length)
        except FileNotFoundError as exc:
            raise MissingObject(f"{ref.key}: no such file") from exc


def file_digest(path: Path) -> str:
    """Content identity of a local file (sha256, streamed)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
