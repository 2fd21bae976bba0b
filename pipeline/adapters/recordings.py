"""Local recordings: which files are recordings, their names and call ids.

Shared by ``callqa ingest`` (object keys of the uploads) and ``callqa run`` (embedded call ids),
so both modes give one recording the same call id. Only the file system: no Kafka or MinIO
client is loaded, so the broker-less mode can name its inputs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.stages.routing import call_id_for

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".opus", ".mp3", ".aiff", ".aif", ".au", ".caf"}


@dataclass(frozen=True)
class Recording:
    path: Path
    key: str
    metadata: dict[str, str]


def find_recordings(paths: Iterable[Path]) -> list[Path]:
    """Files given, and audio files found recursively under folders given, in a stable order."""
    return [path for path, _ in recording_names(paths)]


def recording_names(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """Each recording with its name: the path below the folder it was found in (a file given
    alone: its file name). Folders are kept, so ``a/call.wav`` and ``b/call.wav`` stay two calls.
    Where two inputs hold recordings of one name (``siteA siteB``, each with ``0001.wav``), they
    would be one object, the second upload replacing the first: every recording is then named by
    its path below the inputs' common folder (``siteA/0001.wav``). A file found twice is one."""
    found: dict[str, tuple[Path, str]] = {}  # absolute path -> (path, name)
    for path in paths:
        if path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES:
                    found.setdefault(os.path.abspath(p), (p, p.relative_to(path).as_posix()))
        else:
            found.setdefault(os.path.abspath(path), (path, path.name))
    if len({name for _, name in found.values()}) == len(found):
        return list(found.values())
    base = os.path.commonpath([os.path.dirname(a) for a in found])
    return [(p, Path(a).relative_to(base).as_posix()) for a, (p, _) in found.items()]


def call_ids(names: Iterable[str]) -> dict[str, str]:
    """Each recording name's call id: the name without its extension, as the router derives it from
    the object key, or the whole name where two share that (``call.wav`` and ``call.mp3``)."""
    ids = {name: call_id_for(name, {}) for name in names}
    shared = Counter(ids.values())
    return {name: name if shared[cid] > 1 else cid for name, cid in ids.items()}


def plan_uploads(named: list[tuple[Path, str]], prefix: str, common: dict[str, str]) -> list[Recording]:
    """Object keys keep the folder structure; the call id is then the key without its extension,
    unless two recordings share that: each then carries its name as its ``call-id``."""
    ids = call_ids(name for _, name in named)
    recordings = []
    for path, name in named:
        metadata = dict(common)
        if ids[name] != call_id_for(name, {}):
            metadata.setdefault("call-id", ids[name])
        recordings.append(Recording(path, f"{prefix.strip('/')}/{name}".lstrip("/"), metadata))
    return recordings
