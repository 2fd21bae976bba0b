"""Synthetic recordings for tests: tones and silence in the containers the router must probe."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import soundfile as sf


def tone(duration_s: float, rate: int, channels: int = 1, freq_hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(round(duration_s * rate))) / rate
    cols = [0.2 * np.sin(2 * np.pi * (freq_hz + 110 * c) * t) for c in range(channels)]
    return np.stack(cols, axis=1).astype(np.float32)


def write(path: Path, duration_s: float, rate: int = 16000, channels: int = 1,
          fmt: str = "WAV", subtype: str = "PCM_16", silent: bool = False) -> Path:
    data = tone(duration_s, rate, channels)
    if silent:
        data[:] = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, data, rate, format=fmt, subtype=subtype)
    return path


def wav_with_format_tag(path: Path, tag: int) -> Path:
    """A WAV whose fmt chunk names a codec we do not decode (e.g. 0x0055, MP3-in-WAV)."""
    data = b"\x00" * 800
    fmt = struct.pack("<HHIIHH", tag, 1, 8000, 8000, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path
