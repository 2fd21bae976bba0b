"""The redaction stage's optional policy, pure: replace the original recording with its redacted copy.

With ``redact_replace_original`` on, after a copy is written and verified the stage also writes the
copy's bytes over the original, at its own key, and removes the original's version where the
recordings bucket keeps versions, so no unredacted audio of the call remains. These are the
decisions of that step; the runner (:class:`pipeline.run.redact_step.Redactor`) does the I/O.

- :func:`kept_because`: a copy replaces its original only where it kept the recording's own format
  (a converted copy of a lossy recording is a ``.wav``, not the object at that key), and only where
  the transcript names the content it was made from (an ETag for the conditional put).
- :func:`replacement_metadata` marks the replacement (``callqa-redacted-from``: the ETag of the
  content it replaced, and the copy it is); :func:`replaced_by` reads a mark back, so a transcript
  delivered again after its original was replaced is seen to be done (not ``object_changed``), and
  :func:`is_redacted_original` lets the router skip the replacement's own arrival.
- :func:`check_replaceable` and :func:`version_to_remove` decide on the object found at the key.

No Kafka, no object store client, no audio library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pipeline.events import ObjectRef
from pipeline.stages.storage import ObjectChanged, ObjectInfo

# User metadata of a replaced original (stored as x-amz-meta-<name>; MinIO's events carry it).
REDACTED_FROM = "callqa-redacted-from"  # the ETag of the unredacted content this object replaced
REDACTED_COPY = "callqa-redacted-copy"  # <copies bucket>/<copy key>: the copy whose bytes these are
REDACTED_COPY_VERSION = "callqa-redacted-copy-version"  # that copy's version, where its bucket keeps versions
REDACTED_WITH = "callqa-redacted-with"  # silence or tone, as on the copy
NULL_VERSION = "null"  # S3's name of the one version of an unversioned (or suspended) bucket's key

KeepReason = Literal["converted", "no_etag"]


@dataclass(frozen=True)
class Replaced:
    """What the mark on a replaced original says: the copy it is (and the mode it was cut with)."""

    copy_bucket: str
    copy_key: str
    copy_version: str | None
    mode: str | None


def etag_of(value: str | None) -> str | None:
    """An ETag without its quotes (S3 answers ``"abc"``, events and stats carry ``abc``)."""
    return (value.strip('"') or None) if value else None


def kept_because(converted: bool, source: ObjectRef) -> KeepReason | None:
    """Why the original cannot be replaced by its copy (None: it can). A converted copy is a PCM WAV
    of a lossy recording (MP3, Ogg): written at the original's key it would be a WAV under a name
    that says otherwise, so the original is kept. Without the transcribed ETag there is no
    conditional write, and no way to tell the transcribed content from a later one."""
    if converted:
        return "converted"
    if not etag_of(source.etag):
        return "no_etag"
    return None


def copy_location(bucket: str, key: str) -> str:
    return f"{bucket}/{key}"


def replacement_metadata(
    kept: Mapping[str, str], source: ObjectRef, copy_bucket: str, copy_key: str, copy_version: str | None, mode: str
) -> dict[str, str]:
    """The replacement's user metadata: the original's own (``kept``: roles, call id, agent id, which
    a reader of the recording still needs), any older mark dropped, and the mark of this replacement.
    ASCII values only, as S3 headers require."""
    marks = {REDACTED_FROM, REDACTED_COPY, REDACTED_COPY_VERSION, REDACTED_WITH}
    values = {k: v for k, v in kept.items() if k not in marks}
    values.update(
        {
            REDACTED_FROM: etag_of(source.etag) or "",
            REDACTED_COPY: copy_location(copy_bucket, copy_key),
            REDACTED_COPY_VERSION: copy_version or "",
            REDACTED_WITH: mode,
        }
    )
    return {k: v for k, v in values.items() if v and k.isascii() and v.isascii()}


def is_redacted_original(metadata: Mapping[str, str]) -> bool:
    """True for an object the redaction stage wrote over its original: already transcribed (as the
    original), so the router skips its arrival instead of routing it as a new call."""
    return bool(metadata.get(REDACTED_FROM))


def replaced_by(metadata: Mapping[str, str], source: ObjectRef, copy_bucket: str, copy_key: str) -> Replaced | None:
    """The mark of this transcript's replacement on the object found at the original's key: the
    content it replaced is the transcribed one (ETag) and its bytes are this transcript's copy (a
    replayed transcript, whose copy has another key, is not done by the first run's replacement).
    None: not replaced by this transcript."""
    source_etag = etag_of(source.etag)
    if not source_etag or etag_of(metadata.get(REDACTED_FROM)) != source_etag:
        return None
    if metadata.get(REDACTED_COPY) != copy_location(copy_bucket, copy_key):
        return None
    return Replaced(copy_bucket, copy_key, metadata.get(REDACTED_COPY_VERSION) or None, metadata.get(REDACTED_WITH))


def check_replaceable(current: ObjectInfo, source: ObjectRef) -> None:
    """The object at the key is still the transcribed content (ETag) and, where the transcript names
    a version, that version; else :class:`ObjectChanged` (the key was written again since it was
    transcribed: that write is a call of its own, and is not overwritten)."""
    where = f"{source.bucket}/{source.key}"
    if etag_of(current.etag) != etag_of(source.etag):
        raise ObjectChanged(
            f"{where}: stored content is etag {etag_of(current.etag)}, not the transcribed {etag_of(source.etag)}"
        )
    if source.version_id and current.version_id and current.version_id != source.version_id:
        raise ObjectChanged(
            f"{where}: the current version is {current.version_id}, not the transcribed {source.version_id}"
        )


def version_to_remove(source: ObjectRef, original: ObjectInfo | None, replacement_version: str | None) -> str | None:
    """The original's version to remove once the replacement is stored: the transcript's, else the one
    found at the key before the put (``original``; None where the key already held the replacement).
    None where there is nothing to remove: an unversioned bucket (the overwrite removed it; S3's
    ``null`` version is the replacement itself), or a version that is the replacement."""
    version = source.version_id or (original.version_id if original is not None else None)
    if not version or version == NULL_VERSION or version == replacement_version:
        return None
    return version
