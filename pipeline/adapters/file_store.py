"""Local files as objects (embedded mode): the file adapter of :class:`pipeline.stages.storage.ObjectStore`."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.events import ObjectRef
from pipeline.stages.storage import MissingObject, ObjectInfo


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
