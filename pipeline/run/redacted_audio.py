"""Embedded mode's redacted recordings: ``OUT/redacted/<the call's path>``, PII spans cut out.

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

from pipeline.adapters.fetch import open_recording
from pipeline.adapters.file_store import FileStore
from pipeline.events import ObjectRef, RoutedCall, Transcript
from pipeline.stages.audio_redaction import ChannelSpan, Mode, channels_for, redact_samples
from pipeline.stages.storage import ObjectStore
from pipeline.stages.transcript_event import roles_by_channel

KEPT_FORMATS = {"WAV", "WAVEX", "FLAC", "AIFF"}
KEPT_SUBTYPES = {"PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "ULAW", "ALAW", "FLOAT", "DOUBLE"}
REDACTED_DIR = "redacted"


@dataclass(frozen=True)
class Written:
    path: Path
    converted: bool  # written as a PCM_16 WAV: the recording's own format cannot be written losslessly


def spans_of(call: RoutedCall, transcript: Transcript) -> list[ChannelSpan]:
    """The transcript's PII spans on the channels of their parties."""
    roles = roles_by_channel(call)
    return [
        ChannelSpan(ch, p.start_s, p.end_s) for p in transcript.pii for ch in channels_for(p.role, roles, call.channels)
    ]


def default_name(ref: ObjectRef) -> str:
    """A recording's name where the run did not list it: a local file's name, an object's key."""
    return Path(ref.key).name if ref.bucket == FileStore.BUCKET else ref.key


def relative_name(name: str) -> PurePosixPath:
    """A call's path below ``redacted/``: no root, no ``..`` (an object key is not trusted as a path)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", "/", ".", "..")]
    return PurePosixPath(*parts) if parts else PurePosixPath("call")


def write_redacted(
    store: ObjectStore, call: RoutedCall, transcript: Transcript, out_dir: Path, name: str, mode: Mode = "silence"
) -> Written | None:
    """The redacted copy of a call with PII (None: nothing to cut). Written to a temporary name
    and renamed, so a crash never leaves a partial copy under the final name."""
    spans = spans_of(call, transcript)
    if not spans:
        return None
    with open_recording(call, store.read(call.object)) as f:
        fmt, subtype, rate = f.format, f.subtype, f.samplerate
        lossless = fmt in KEPT_FORMATS and subtype in KEPT_SUBTYPES
        # int32 holds every integer PCM sample exactly (libsndfile scales to the top bits)
        samples = f.read(
            dtype="int32" if lossless and subtype.startswith(("PCM", "ULAW", "ALAW")) else "float64", always_2d=True
        )
    redacted = redact_samples(np.ascontiguousarray(samples.T), rate, spans, mode).T
    keep = lossless and soundfile.check_format(fmt, subtype)
    dest = out_dir / REDACTED_DIR / relative_name(name)
    if not keep:
        dest = dest.with_name(f"{dest.name}.wav")  # card.mp3 -> card.mp3.wav: never a card.wav beside it
        fmt, subtype = "WAV", "PCM_16"
    dest.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    soundfile.write(buf, redacted, rate, subtype=subtype, format=fmt)
    tmp = dest.with_name(f".{dest.name}.partial")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, dest)
    return Written(dest, converted=not keep)


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
