"""The inputs of ``callqa run``: local files and folders, or one ``s3://bucket/prefix``, with the
call ids and names ``callqa ingest`` would give them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.adapters.file_store import FileStore
from pipeline.adapters.recordings import call_ids, find_recordings, recording_names
from pipeline.events import ObjectRef
from pipeline.stages.storage import ObjectStore


def local_call_ids(paths: list[str]) -> dict[str, str]:
    """Local recordings' call ids: the name below the folder given, without its extension, as
    ``callqa ingest`` names their objects (the distributed pipeline gives the same ids)."""
    names = local_names(paths)
    ids = call_ids(names.values())
    return {key: ids[name] for key, name in names.items()}


def local_names(paths: list[str]) -> dict[str, str]:
    """Local recordings' names (object key -> path below the folder given, as ``callqa ingest`` names them)."""
    named = recording_names([Path(p) for p in paths if not p.startswith("s3://")])
    return {FileStore.ref_for(p).key: name for p, name in named}


def input_refs(paths: list[str], settings: Any) -> tuple[ObjectStore, list[ObjectRef]]:
    """Local files and folders, or one ``s3://bucket/prefix`` (listed through the configured endpoint)."""
    from pipeline.adapters.minio_store import retrying_store, storage_client

    remote = [p for p in paths if p.startswith("s3://")]
    if remote:
        if len(remote) != len(paths):
            raise ValueError("mix of s3:// and local inputs: run them separately")
        client = storage_client(settings)
        refs = []
        for url in remote:
            bucket, _, prefix = url.removeprefix("s3://").partition("/")
            refs += [
                ObjectRef(bucket=bucket, key=o.object_name)
                for o in client.list_objects(bucket, prefix=prefix, recursive=True)
                if not o.is_dir
            ]
        return retrying_store(settings), refs
    return FileStore(), [FileStore.ref_for(p) for p in find_recordings([Path(p) for p in paths])]
