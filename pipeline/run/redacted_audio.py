"""Redacted recordings: PII spans cut out of a copy (:func:`redacted_copy`, shared by both modes); the
embedded mode writes it to ``OUT/redacted/<the call's path>`` (:func:`write_redacted`), the distributed
redaction stage to the object store (:mod:`pipeline.run.redact`).

The original object is read again (the engine's audio is resampled; the copy is cut at the
recording's own rate) and written in its own format and subtype where that is lossless and
writable (WAV/FLAC/AIFF PCM, u-law, A-law), so every sample outside the spans is the original's;
anything else (MP3, Ogg) becomes a PCM_16 WAV of the same rate and channels, named ``<name>.wav``.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import soundfile

from pipeline.adapters.fetch import open_probed
from pipeline.adapters.file_store import FileStore
from pipeline.events import ObjectRef, RoutedCall, Transcript
from pipeline.stages.audio_redaction import ChannelSpan, Mode, channels_for, redact_samples
from pipeline.stages.probe import AudioInfo, decoder_error
from pipeline.stages.redacted_copies import UnreadableRecording, check_size, copy_name
from pipeline.stages.storage import ObjectStore
from pipeline.stages.transcript_event import roles_by_channel

KEPT_FORMATS = {"WAV", "WAVEX", "FLAC", "AIFF"}
KEPT_SUBTYPES = {"PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "ULAW", "ALAW", "FLOAT", "DOUBLE"}
REDACTED_DIR = "redacted"


@dataclass(frozen=True)
class Written:
    path: Path
    converted: bool  # written as a PCM_16 WAV: the recording's own format cannot be written losslessly


@dataclass(frozen=True)
class RedactedCopy:
    """A recording with its spans cut, ready to store: the bytes and the name they go under."""

    data: bytes
    name: str  # the name asked for, or ``<name>.wav`` when converted
    format: str  # libsndfile's container name: WAV, FLAC, AIFF
    subtype: str  # PCM_16, ULAW, ...
    sample_rate_hz: int
    channels: int
    converted: bool  # the recording's own format cannot be written losslessly: a PCM_16 WAV

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES.get(self.format, "application/octet-stream")


CONTENT_TYPES = {"WAV": "audio/wav", "WAVEX": "audio/wav", "FLAC": "audio/flac", "AIFF": "audio/aiff"}


def spans_of(call: RoutedCall, transcript: Transcript) -> list[ChannelSpan]:
    """The transcript's PII spans on the channels of their parties."""
    roles = roles_by_channel(call)
    return [
        ChannelSpan(ch, p.start_s, p.end_s) for p in transcript.pii for ch in channels_for(p.role, roles, call.channels)
    ]


def info_of(call: RoutedCall) -> AudioInfo:
    """What the router probed, as the decoder takes it."""
    return AudioInfo(call.container, call.codec, call.sample_rate_hz, call.channels, call.frames)


def default_name(ref: ObjectRef) -> str:
    """A recording's name where the run did not list it: a local file's name, an object's key."""
    return Path(ref.key).name if ref.bucket == FileStore.BUCKET else ref.key


def relative_name(name: str) -> PurePosixPath:
    """A call's path below ``redacted/``: no root, no ``..`` (an object key is not trusted as a path)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", "/", ".", "..")]
    return PurePosixPath(*parts) if parts else PurePosixPath("call")


def sample_bytes(subtype: str, lossless: bool) -> int:
    """Bytes per sample of the copy (its own subtype's, else PCM_16's)."""
    if not lossless:
        return 2
    return {"PCM_S8": 1, "PCM_U8": 1, "ULAW": 1, "ALAW": 1, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4, "DOUBLE": 8}.get(
        subtype, 2
    )


def redacted_copy(
    data: bytes,
    info: AudioInfo,
    spans: list[ChannelSpan],
    name: str,
    mode: Mode = "silence",
    max_bytes: int | None = None,
) -> RedactedCopy:
    """The recording in ``data`` with ``spans`` cut, encoded in its own format and subtype where that is
    lossless (else a PCM_16 WAV named ``<name>.wav``). One function for the embedded and the
    distributed redaction. Raises :class:`CopyTooLarge` before decoding a recording whose copy would be
    over ``max_bytes``, :class:`UnreadableRecording` when the bytes do not decode."""
    try:
        with open_probed(data, info) as f:
            fmt, subtype, rate = f.format, f.subtype, f.samplerate
            lossless = fmt in KEPT_FORMATS and subtype in KEPT_SUBTYPES
            if max_bytes is not None:
                check_size(f.frames, f.channels, sample_bytes(subtype, lossless), max_bytes)
            # int32 holds every integer PCM sample exactly (libsndfile scales to the top bits)
            samples = f.read(
                dtype="int32" if lossless and subtype.startswith(("PCM", "ULAW", "ALAW")) else "float64",
                always_2d=True,
            )
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as exc:
        raise UnreadableRecording(f"the recording cannot be decoded: {decoder_error(exc)}") from exc
    if samples.shape[1] != info.channels or rate != info.sample_rate_hz:
        raise UnreadableRecording(
            f"the object holds {samples.shape[1]} channel(s) at {rate} Hz, the call {info.channels} at "
            f"{info.sample_rate_hz} Hz"
        )
    redacted = redact_samples(np.ascontiguousarray(samples.T), rate, spans, mode).T
    keep = lossless and soundfile.check_format(fmt, subtype)
    if not keep:
        fmt, subtype = "WAV", "PCM_16"
    buf = io.BytesIO()
    soundfile.write(buf, redacted, rate, subtype=subtype, format=fmt)
    return RedactedCopy(buf.getvalue(), copy_name(name, not keep), fmt, subtype, rate, samples.shape[1], not keep)


def stored_copy(data: bytes, name: str) -> RedactedCopy:
    """A copy written before, read back from its bucket, described as :func:`redacted_copy` described it
    (its format, subtype, rate and channels from its own header). Only a copy that kept the recording's
    own format is read back so (one that replaced its original): ``converted`` is False."""
    try:
        info = soundfile.info(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as exc:
        raise UnreadableRecording(f"the stored copy {name} cannot be decoded: {decoder_error(exc)}") from exc
    return RedactedCopy(data, name, info.format, info.subtype, info.samplerate, info.channels, converted=False)


def write_redacted(
    store: ObjectStore, call: RoutedCall, transcript: Transcript, out_dir: Path, name: str, mode: Mode = "silence"
) -> Written | None:
    """The redacted copy of a call with PII (None: nothing to cut), under ``out_dir/redacted/``. Written to
    a temporary name and renamed, so a crash never leaves a partial copy under the final name."""
    spans = spans_of(call, transcript)
    if not spans:
        return None
    copy = redacted_copy(store.read(call.object), info_of(call), spans, str(relative_name(name)), mode)
    dest = out_dir / REDACTED_DIR / copy.name  # card.mp3 -> card.mp3.wav: never a card.wav beside it
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial")
    tmp.write_bytes(copy.data)
    os.replace(tmp, dest)
    return Written(dest, converted=copy.converted)


def redaction_lines(written: int, as_wav: list[str], failed: list[str]) -> list[str]:
    """The summary's lines on the redacted copies of this run (none when there was nothing to cut)."""
    if not (written or failed):
        return []
    lines = [f"redacted audio: {written} copies written under {REDACTED_DIR}/"]
    if as_wav:
        lines.append(
            f"  {len(as_wav)} as PCM_16 WAV (their own format is not written losslessly): " + ", ".join(as_wav[:20])
        )
    if failed:
        lines.append(f"  not written for {len(failed)} call(s) with PII (see the log): " + ", ".join(failed[:20]))
    return lines
