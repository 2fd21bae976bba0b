"""Local files as objects (embedded mode): the file adapter of :class:`pipeline.stages.storage.ObjectStore`."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.events import ObjectRef
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectInfo


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
        """A read that returns the whole file is checked against ``ref.etag`` (its sha256), as the
        worker's fetch is: a file rewritten since routing is :class:`ObjectChanged`. A range read
        is not (that would read the whole file for a header)."""
        try:
            with open(ref.key, "rb") as f:
                f.seek(offset)
                data = f.read(-1 if length is None else length)
                whole = offset == 0 and (length is None or len(data) < length or not f.read(1))
        except FileNotFoundError as exc:
            raise MissingObject(f"{ref.key}: no such file") from exc
        if ref.etag and whole and hashlib.sha256(data).hexdigest() != ref.etag:
            raise ObjectChanged(f"{ref.key}: content is no longer sha256 {ref.etag} (rewritten since)")
        return data


def file_digest(path: Path) -> str:
    """Content identity of a local file (sha256, streamed)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
