"""Probe a recording: container, codec, rate, channels, frames, duration.

WAV and FLAC are read from their headers plus the object size, so the router
fetches only the first bytes of an object. soundfile's own reading of a partial WAV
reports only the frames of the bytes it got, so WAV frames come from the header's
block alignment and the data chunk size. Other containers need the whole object
(:func:`probe_full`). Pure: no storage, no Kafka.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import soundfile

from pipeline.errors import CallQAError
from pipeline.events import ReasonCode
from pipeline.stages.audio_limits import implausible_header

HEAD_BYTES = 64 * 1024

# WAVE format tags soundfile decodes for us (0xFFFE: WAVE_FORMAT_EXTENSIBLE, sub-format checked).
_WAV_CODECS = {1: "PCM", 3: "FLOAT", 6: "ALAW", 7: "ULAW"}
# Block codecs call recorders use: soundfile decodes them too, but the samples a block holds are
# the codec's, so their length is read from the whole object.
_WAV_BLOCK_CODECS = frozenset({0x0002, 0x0011, 0x0031})  # MS ADPCM, IMA ADPCM, GSM 6.10
_WAV_EXTENSIBLE = 0xFFFE

# The fewest bytes one FLAC frame can take (header, one constant subframe per channel, CRC):
# a stream cannot hold more than (size / this) frames of at most max-block-size samples.
_FLAC_MIN_FRAME_BYTES = 8


class ProbeError(CallQAError):
    """The recording cannot be routed; ``reason`` is the dead-letter reason code."""

    def __init__(self, reason: ReasonCode, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class AudioInfo:
    container: str
    codec: str
    sample_rate_hz: int
    channels: int
    frames: int

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate_hz


class NeedsFullRead(CallQAError):
    """The header alone does not give the duration (not an error: read the whole object)."""


def probe_head(head: bytes, size_bytes: int) -> AudioInfo:
    """Probe from the first bytes of an object and its total size.

    Raises ProbeError for bad input, NeedsFullRead when the container must be read whole.
    """
    if size_bytes == 0 or not head:
        raise ProbeError("empty_object", "the object is empty")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return _probe_wav(head, size_bytes)
    if head[:4] in (b"RIFF", b"RIFX", b"RF64"):
        raise ProbeError("corrupt_header", f"RIFF container without a WAVE form ({head[8:12]!r})")
    if head[:4] == b"fLaC":
        return _probe_flac(head, size_bytes)
    raise NeedsFullRead()


def _chunks(head: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Yield (chunk id, offset of its data, declared size) for the RIFF chunks in ``head``."""
    pos = 12
    while pos + 8 <= len(head):
        chunk_id, size = struct.unpack_from("<4sI", head, pos)
        yield chunk_id, pos + 8, size
        pos += 8 + size + (size & 1)  # chunks are word aligned


def _probe_wav(head: bytes, size_bytes: int) -> AudioInfo:
    fmt = data = None
    for chunk_id, offset, size in _chunks(head):
        if chunk_id == b"fmt ":
            if size < 16 or offset + 16 > len(head):
                raise ProbeError("corrupt_header", "WAV fmt chunk is too short")
            fmt = struct.unpack_from("<HHIIHH", head, offset)
            if fmt[0] == _WAV_EXTENSIBLE and size >= 40 and offset + 26 <= len(head):
                fmt = (struct.unpack_from("<H", head, offset + 24)[0], *fmt[1:])
        elif chunk_id == b"data":
            data = (offset, size)
            break
    if fmt is None:
        raise ProbeError("corrupt_header", "WAV without a fmt chunk before its data")
    if data is None:
        if len(head) >= size_bytes:
            raise ProbeError("corrupt_header", "WAV without a data chunk")
        raise NeedsFullRead()  # a long header (metadata chunks) beyond the bytes we read
    tag, channels, rate, _, block_align, bits = fmt
    if tag in _WAV_BLOCK_CODECS:
        _check_plausible("WAV", channels, rate)
        _data_bytes(data, size_bytes)
        raise NeedsFullRead()
    if tag not in _WAV_CODECS:
        raise ProbeError("unsupported_codec", f"WAV format tag 0x{tag:04x} is not supported")
    _check_plausible("WAV", channels, rate)
    expected_align = channels * ((8 if tag in (6, 7) else bits + 7) // 8)
    if block_align != expected_align:
        raise ProbeError(
            "corrupt_header",
            f"WAV block_align {block_align} is not channels x bytes per sample "
            f"({channels} x {bits} bits = {expected_align})",
        )
    codec = f"{_WAV_CODECS[tag]}_{bits}" if tag in (1, 3) else _WAV_CODECS[tag]
    return AudioInfo("WAV", codec, rate, channels, _data_bytes(data, size_bytes) // block_align)


def _data_bytes(data: tuple[int, int], size_bytes: int) -> int:
    """The bytes of a WAV's data chunk (offset, declared size) in an object of ``size_bytes``."""
    offset, declared = data
    available = size_bytes - offset
    if declared in (0xFFFFFFFF, 0):  # streaming writers leave the size open
        declared = available
    if declared > available:
        raise ProbeError("truncated", f"WAV data chunk declares {declared} bytes, the object holds {available}")
    return declared


def wav_data_offset(head: bytes) -> int | None:
    """Where a WAV's samples start (its data chunk), if within ``head``."""
    return next((offset for chunk_id, offset, _ in _chunks(head) if chunk_id == b"data"), None)


# libsndfile's RAW subtype for each WAV codec as the probe names it (8-bit WAV PCM is unsigned).
RAW_SUBTYPES = {
    "PCM_8": "PCM_U8",
    "PCM_16": "PCM_16",
    "PCM_24": "PCM_24",
    "PCM_32": "PCM_32",
    "FLOAT_32": "FLOAT",
    "FLOAT_64": "DOUBLE",
    "ULAW": "ULAW",
    "ALAW": "ALAW",
}


def _check_plausible(container: str, channels: int, rate: int) -> None:
    problem = implausible_header(container, channels, rate)
    if problem:
        raise ProbeError("corrupt_header", problem)


def _probe_flac(head: bytes, size_bytes: int) -> AudioInfo:
    # STREAMINFO is always the first metadata block: 4 header bytes, then 34 bytes.
    if len(head) < 42 or head[4] & 0x7F != 0:
        raise ProbeError("corrupt_header", "FLAC without a STREAMINFO block")
    max_block = int.from_bytes(head[10:12], "big")
    info = int.from_bytes(head[18:26], "big")
    rate = info >> 44
    channels = ((info >> 41) & 0x7) + 1
    bits = ((info >> 36) & 0x1F) + 1
    frames = info & ((1 << 36) - 1)
    _check_plausible("FLAC", channels, rate)
    if max_block < 16:
        raise ProbeError("corrupt_header", f"FLAC STREAMINFO max block size {max_block} (at least 16)")
    if frames == 0:
        raise NeedsFullRead()  # an encoder that did not know the length
    most = size_bytes // (_FLAC_MIN_FRAME_BYTES + channels) * max_block
    if frames > most:
        raise ProbeError(
            "corrupt_header", f"FLAC STREAMINFO claims {frames} samples; {size_bytes} bytes hold at most {most}"
        )
    return AudioInfo("FLAC", f"PCM_{bits}", rate, channels, frames)


def probe_full(data: bytes) -> AudioInfo:
    """Probe a whole object with libsndfile (every container but a header-probed WAV or FLAC), with the
    same channel and rate limits."""
    if not data:
        raise ProbeError("empty_object", "the object is empty")
    try:
        info = soundfile.info(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as exc:
        raise ProbeError("not_audio", f"not a readable audio file: {decoder_error(exc)}") from exc
    _check_plausible(info.format, info.channels, info.samplerate)  # before any decode (AIFF, OGG, CAF, ...)
    frames = info.frames
    if frames <= 0 or frames >= 2**62:  # libsndfile reports "unknown" as a huge number
        frames = _count_frames(data, info.format)
    return AudioInfo(info.format, info.subtype, info.samplerate, info.channels, frames)


def _count_frames(data: bytes, container: str) -> int:
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as f:
            return sum(len(block) for block in f.blocks(blocksize=65536))
    except (soundfile.LibsndfileError, RuntimeError) as exc:
        if container == "FLAC":  # libsndfile cannot read to the end of a FLAC that does not say its length
            raise ProbeError(
                "unsupported_codec",
                "FLAC without a length in its header (written as a stream) cannot be decoded here; "
                "re-encode it with its length, e.g. `sox in.flac out.flac`",
            ) from exc
        raise ProbeError("corrupt_header", f"audio stream cannot be decoded: {decoder_error(exc)}") from exc


def decoder_error(exc: Exception) -> str:
    """libsndfile's own words, without soundfile's prefix that names an in-memory buffer by address."""
    text = getattr(exc, "error_string", None) or str(exc)
    return str(text).rstrip(".")


def validate(info: AudioInfo, max_duration_s: float) -> AudioInfo:
    """Reject what no later stage can use. Pure silence is fine: it yields no speech later."""
    if info.frames == 0:
        raise ProbeError("zero_duration", "the recording has no audio frames")
    if info.duration_s > max_duration_s:
        raise ProbeError("too_long", f"{info.duration_s:.0f}s is longer than the {max_duration_s:.0f}s maximum")
    return info
