"""What the stages need of object storage: a small protocol and its errors (no client library).

Adapters: :mod:`pipeline.adapters.minio_store` (MinIO/S3) and
:mod:`pipeline.adapters.file_store` (local files, embedded mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pipeline.errors import CallQAError
from pipeline.events import ObjectRef


class StorageError(CallQAError):
    """Storage could not be reached or answered with an error; worth retrying unless ``transient`` is false."""

    transient = True


class NoOutcome(CallQAError):
    """The process is stopping while it waited for storage: the call gets no outcome (it is read again)."""


class MissingObject(StorageError):
    """The object (or that version of it) does not exist; retrying will not help."""

    transient = False


class ObjectChanged(StorageError):
    """The object under the key is no longer the content that was routed (its etag differs):
    an unversioned bucket's key was written again. Retrying reads the same new content."""

    transient = False


class StorageRefused(StorageError):
    """Storage answered that it will not serve this request (access denied, a bad request): permanent."""

    transient = False


@dataclass(frozen=True)
class ObjectInfo:
    size_bytes: int
    etag: str | None
    version_id: str | None
    metadata: dict[str, str]


class ObjectStore(Protocol):
    def stat(self, ref: ObjectRef) -> ObjectInfo: ...

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        """The bytes of ``ref``; when ``ref.etag`` is set, of that content only, else :class:`ObjectChanged`."""
        ...


class ObjectWriter(Protocol):
    def put(
        self, bucket: str, key: str, data: bytes, content_type: str, metadata: dict[str, str] | None = None
    ) -> ObjectInfo:
        """Store ``data`` under ``bucket/key`` (replacing what is there); the stored object's size, etag, version."""
        ...


class OriginalReplacer(Protocol):
    """What the redaction stage's ``redact_replace_original`` policy needs of the recordings' store."""

    def put_if_match(self, ref: ObjectRef, data: bytes, content_type: str, metadata: dict[str, str]) -> ObjectInfo:
        """Write ``data`` over ``ref.bucket/ref.key`` only while the stored object's ETag is ``ref.etag``
        (checked by the server, in the same request): else :class:`ObjectChanged`."""
        ...

    def remove_version(self, ref: ObjectRef) -> None:
        """Remove the version ``ref.version_id`` of ``ref.key`` for good (no delete marker)."""
        ...


T = TypeVar("T")


def storage_call(call: Callable[..., T], *args: Any) -> T:
    """A store call whose every failure is a StorageError, for every store (clients raise more than they
    document: a local file's PermissionError, a socket error): the one place store errors are classified,
    so the router and the fetch give the same failure the same reason (``fetch_failed``)."""
    try:
        return call(*args)
    except (StorageError, NoOutcome):
        raise
    except Exception as exc:
        raise StorageError(f"{type(exc).__name__}: {exc}") from exc
