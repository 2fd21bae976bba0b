"""The distributed redaction stage's decisions, pure: which spans, which key, which event, which letter.

One transcript in (``asr.transcripts``), one outcome out: :class:`Redact` (a copy to write, with its
spans and key), :class:`NothingToRedact` (no PII span) or :class:`~pipeline.stages.outcomes.Dead`.
After the runner has written the copy, :func:`redacted_event` names it on ``audio.redacted``;
a failure on the way is mapped to its dead-letter reason by :func:`letter_for`. No Kafka, no
object store, no audio library: the runner (:mod:`pipeline.run.redact`) does the I/O.

The key is a function of the transcript alone (its object and replay lineage) and of the target,
so a redelivered or replayed transcript writes the same key again instead of a second copy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from pipeline.errors import CallQAError, DecodeError
from pipeline.events import (
    AudioRedacted,
    DeadLetter,
    PIISpan,
    ReasonCode,
    RedactedSpan,
    SourcePosition,
    Transcript,
    decode,
)
from pipeline.stages.audio_redaction import GUARD_S, ChannelSpan, Mode, channels_for
from pipeline.stages.outcomes import Dead
from pipeline.stages.probe import HEAD_BYTES, AudioInfo, NeedsFullRead, ProbeError, probe_full, probe_head
from pipeline.stages.retry import StorageUnavailable
from pipeline.stages.routing import RoutingError, parse_roles
from pipeline.stages.storage import MissingObject, ObjectChanged, StorageError

# Object keys under this marker can never collide with a bucket name (S3 bucket names have no "_").
REPLAY_DIR = "_replay"
WAV_SUFFIX = ".wav"  # a copy whose own format is not written losslessly: <key>.wav, PCM_16


class CopyTooLarge(CallQAError):
    """The copy would be larger than the configured limit (decoded, it would take as much memory again)."""


class UnreadableRecording(CallQAError):
    """The stored object cannot be decoded as the recording its transcript was made from."""


@dataclass(frozen=True)
class Target:
    """Where copies go: a bucket and a key prefix (``""`` or ending in ``/``, as the operator wrote it)."""

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        if not self.bucket:
            raise ValueError("the redacted copies' bucket is empty")
        if self.prefix.startswith("/"):
            raise ValueError(f"the redacted copies' prefix {self.prefix!r} starts with '/'")


@dataclass(frozen=True)
class Redact:
    """A transcript with PII: cut ``spans`` from ``transcript.object``, write it at ``key``."""

    transcript: Transcript
    spans: tuple[tuple[PIISpan, tuple[int, ...]], ...]  # each PII span and the channels it is cut on
    key: str

    @property
    def channel_spans(self) -> list[ChannelSpan]:
        return [ChannelSpan(ch, p.start_s, p.end_s) for p, channels in self.spans for ch in channels]


@dataclass(frozen=True)
class NothingToRedact:
    """No PII span: nothing is written and no event is published (the transcript's empty ``pii`` says so)."""

    call_id: str


RedactOutcome = Redact | NothingToRedact | Dead[None]  # a transcript planned
RedactedOutcome = AudioRedacted | NothingToRedact | Dead[None]  # a transcript done: what is written of it
Phase = Literal["read", "write", "replace"]  # replace: the policy redact_replace_original's step


def copy_key(target: Target, transcript: Transcript) -> str:
    """``<prefix><bucket>/<key>`` of the original; a replayed transcript's under ``_replay/<replay_id>/``.

    Deterministic: the same transcript gives the same key (a redelivery overwrites its copy). The
    ``.wav`` of a converted copy is added by :func:`copy_name`.
    """
    ref = transcript.object
    lineage = f"{REPLAY_DIR}/{transcript.replay_id}/" if transcript.replay_id else ""
    return f"{target.prefix}{lineage}{ref.bucket}/{ref.key}"


def copy_name(key: str, converted: bool) -> str:
    """A converted copy (PCM_16 WAV) is ``<key>.wav``: never the name of another recording's copy."""
    return f"{key}{WAV_SUFFIX}" if converted else key


def channel_roles(transcript: Transcript) -> dict[int, str]:
    """Who is on which channel, decided as the router decided it: from the recording's ``roles`` metadata
    (carried on the transcript) and its channel count. Not from the segments: a channel whose party
    said nothing has none, and a mono mix on two channels is transcribed as one."""
    roles = parse_roles(transcript.metadata.get("roles"), transcript.channels)
    return {int(channel): role for channel, role in roles.items()}


def plan(transcript: Transcript, target: Target) -> Redact | NothingToRedact:
    """The spans to cut, each on its party's channels (every channel where no channel has its role)."""
    if not transcript.pii:
        return NothingToRedact(transcript.call_id)
    roles = channel_roles(transcript)
    spans = tuple(
        (p, tuple(channels_for(p.role, roles, transcript.channels)))
        for p in sorted(transcript.pii, key=lambda p: (p.start_s, p.end_s, p.role))
    )
    return Redact(transcript, spans, copy_key(target, transcript))


def plan_payload(
    payload: bytes, key: bytes | None, target: Target, source: SourcePosition | None = None
) -> RedactOutcome:
    """Decode a transcript event and plan its copy; never raises."""
    try:
        transcript = decode(payload, Transcript)
    except DecodeError as exc:
        return dead("malformed_transcript", str(exc), payload, key, source)
    try:
        return plan(transcript, target)
    except RoutingError as exc:  # roles metadata the router would not have routed
        return dead("malformed_transcript", f"roles: {exc}", payload, key, source)


def copy_size_bytes(frames: int, channels: int, bytes_per_sample: int) -> int:
    """The copy's size as PCM (an upper bound for FLAC), checked before the recording is decoded."""
    return frames * channels * bytes_per_sample + 4096  # headers and chunks


def check_size(frames: int, channels: int, bytes_per_sample: int, limit_bytes: int) -> None:
    size = copy_size_bytes(frames, channels, bytes_per_sample)
    if size > limit_bytes:
        raise CopyTooLarge(
            f"the redacted copy would take about {size} bytes, above the {limit_bytes}-byte limit "
            "(redact_max_copy_bytes)"
        )


def probe_recording(data: bytes) -> AudioInfo:
    """The stored recording probed as the router probes it (the transcript does not say its format)."""
    try:
        return probe_head(data[:HEAD_BYTES], len(data))
    except NeedsFullRead:
        return probe_full(data)


def check_matches(info: AudioInfo, transcript: Transcript) -> None:
    """The stored recording is the one transcribed: as many channels (the spans' channels exist)."""
    if info.channels != transcript.channels:
        raise UnreadableRecording(f"the object has {info.channels} channel(s), its transcript {transcript.channels}")


def copy_metadata(plan_: Redact, mode: Mode) -> dict[str, str]:
    """The copy's own user metadata (ASCII only, as S3 headers require): what it was made from, and how."""
    ref = plan_.transcript.object
    values = {"callqa-source-etag": ref.etag, "callqa-source-version": ref.version_id, "callqa-redacted-with": mode}
    return {k: v for k, v in values.items() if v and v.isascii()}


def redacted_event(
    plan_: Redact,
    *,
    bucket: str,
    key: str,
    data: bytes,
    version_id: str | None,
    format: str,
    subtype: str,
    converted: bool,
    sample_rate_hz: int,
    channels: int,
    mode: Mode,
    guard_s: float = GUARD_S,
    original_replaced: bool = False,
) -> AudioRedacted:
    """The ``audio.redacted`` event naming a copy that was written (its bytes give size and sha256)."""
    t = plan_.transcript
    return AudioRedacted(
        call_id=t.call_id,
        bucket=bucket,
        key=key,
        version_id=version_id,
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        format=format,
        subtype=subtype,
        converted=converted,
        sample_rate_hz=sample_rate_hz,
        channels=channels,
        source=t.object,
        mode=mode,
        guard_s=guard_s,
        spans=[
            RedactedSpan(
                type=p.type,
                role=p.role,
                start_s=p.start_s,
                end_s=p.end_s,
                word_timed=p.word_timed,
                channels=list(chs),
            )
            for p, chs in plan_.spans
        ],
        replay_id=t.replay_id,
        replay_lineage=list(t.replay_lineage),
        original_replaced=original_replaced,
    )


def reason_for(error: BaseException, phase: Phase) -> tuple[ReasonCode, str]:
    """A failure's dead-letter reason and message (exception messages name objects, never audio)."""
    if phase == "replace" and isinstance(error, StorageError) and not isinstance(error, ObjectChanged | MissingObject):
        detail = "storage unavailable" if isinstance(error, StorageUnavailable) else "storage refused"
        return "write_failed", f"replacing the original with its copy (the copy is written): {detail}: {error}"
    if isinstance(error, StorageError) and phase == "write":  # the target bucket missing, refused, an outage
        detail = "storage unavailable" if isinstance(error, StorageUnavailable) else "storage refused"
        return "write_failed", f"writing the copy: {detail}: {error}"
    if isinstance(error, MissingObject):
        return "missing_object", f"the original recording is gone: {error}"
    if isinstance(error, ObjectChanged):
        return "object_changed", f"the original recording was written again since it was transcribed: {error}"
    if isinstance(error, ProbeError):  # the router's own reasons: not_audio, corrupt_header, ...
        return error.reason, f"the original recording: {error}"
    if isinstance(error, CopyTooLarge):
        return "output_too_large", str(error)
    if isinstance(error, UnreadableRecording):
        return "decode_failed", str(error)
    if isinstance(error, StorageError):  # an outage past the retry deadline, access denied, ...
        detail = "storage unavailable" if isinstance(error, StorageUnavailable) else "storage refused"
        return "fetch_failed", f"reading the original: {detail}: {error}"
    return "internal_error", f"redaction failed: {type(error).__name__}"


def letter_for(
    error: BaseException, phase: Phase, payload: bytes, key: bytes | None, source: SourcePosition | None
) -> Dead[None]:
    reason, message = reason_for(error, phase)
    return dead(reason, message, payload, key, source)


def dead(
    reason: ReasonCode, message: str, payload: bytes, key: bytes | None, source: SourcePosition | None
) -> Dead[None]:
    return Dead(DeadLetter.of(payload=payload, key=key, reason=reason, message=message, stage="redact", source=source))
