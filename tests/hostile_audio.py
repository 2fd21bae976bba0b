"""Recordings whose headers lie: each would make a trusting reader allocate or read far too much."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import soundfile as sf


def wav_header(channels: int, rate: int, block_align: int, bits: int, data_bytes: int, tag: int = 1) -> bytes:
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block_align, block_align, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", data_bytes)
    return b"RIFF" + struct.pack("<I", len(body) - 4 + data_bytes + 4) + body


def wav_block_align_65535(path: Path, size_bytes: int = 64 * 2**20) -> Path:
    """A 64 MiB mono 16-bit WAV whose header says each frame takes 65535 bytes."""
    header = wav_header(1, 8000, 65535, 16, size_bytes - 44)
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(size_bytes)  # zeros: silence
    return path


def wav_65535_channels(path: Path, size_bytes: int = 80_000) -> Path:
    """An 80 KB WAV that claims 65535 channels of 16-bit audio."""
    header = wav_header(65535, 8000, (65535 * 2) & 0xFFFF, 16, size_bytes - 44)
    path.write_bytes(header + bytes(size_bytes - 44))
    return path


def flac_claiming_samples(path: Path, total_samples: int = 2**36 - 1) -> Path:
    """A real one-second FLAC whose STREAMINFO says it holds ``total_samples`` samples (2^36 - 1 is the
    most its 36-bit field can say: 2^36 itself reads as 0, "length unknown")."""
    buf = io.BytesIO()
    sf.write(buf, np.zeros(8000, dtype=np.float32), 8000, format="FLAC")
    data = bytearray(buf.getvalue())
    info = int.from_bytes(data[18:26], "big")
    info = (info & ~((1 << 36) - 1)) | (total_samples & ((1 << 36) - 1))
    data[18:26] = info.to_bytes(8, "big")
    path.write_bytes(bytes(data))
    return path


def streamed_flac(path: Path, duration_s: float, rate: int = 8000) -> Path:
    """A silent FLAC whose STREAMINFO leaves the length open (total samples 0, as a streaming encoder
    writes it): only decoding tells how long it is. An hour of silence takes about 80 KB."""
    buf = io.BytesIO()
    sf.write(buf, np.zeros(int(duration_s * rate), dtype=np.float32), rate, format="FLAC")
    data = bytearray(buf.getvalue())
    info = int.from_bytes(data[18:26], "big") & ~((1 << 36) - 1)
    data[18:26] = info.to_bytes(8, "big")
    path.write_bytes(bytes(data))
    return path


def implausible(path: Path, fmt: str, subtype: str, channels: int, rate: int, frames: int = 2000) -> Path:
    """A real, silent recording in ``fmt`` whose header honestly says ``channels`` and ``rate``: values no
    call recording has, which size a trusting decoder's buffer (64 channels x 384 kHz x 4 h is 1.3 TB)."""
    sf.write(path, np.zeros((frames, channels), dtype=np.float32), rate, format=fmt, subtype=subtype)
    return path
