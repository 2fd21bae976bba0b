"""PII spans -> a redacted copy of a recording's samples. Pure (numpy only).

Each span (call seconds, one party) plus a guard either side is replaced by silence or a
1 kHz tone on that party's channel only; every other sample is the original's, bit for bit.
Times map to samples at the recording's own rate (an 8 kHz call is cut at 8 kHz, not at the
engine's 16 kHz), so the copy can be written back in the recording's own format.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pipeline.intervals import merge_intervals

Mode = Literal["silence", "tone"]
GUARD_S = 0.08  # word boundaries from the alignment heads are tens of ms off; a guard covers them
TONE_HZ = 1000.0
TONE_DBFS = -20.0


@dataclass(frozen=True)
class ChannelSpan:
    channel: int
    start_s: float
    end_s: float


def channels_for(role: str, roles: Mapping[int, str], channels: int) -> list[int]:
    """The channels a span of ``role`` is on: a mono call's one channel; on more, the channels of
    that role, or every channel where none has it (fail closed: the audio is cut, not kept)."""
    if channels == 1:
        return [0]
    matched = sorted(ch for ch, r in roles.items() if r == role and 0 <= ch < channels)
    return matched or list(range(channels))


def sample_ranges(
    spans: Iterable[ChannelSpan], rate: int, frames: int, guard_s: float = GUARD_S
) -> dict[int, list[tuple[int, int]]]:
    """Per channel, the merged half-open sample ranges [lo, hi) the spans plus guard cover,
    clamped to the recording (rounded outwards: a partly covered sample is cut)."""
    raw: dict[int, list[tuple[int, int]]] = {}
    for s in spans:
        lo = max(0, math.floor((s.start_s - guard_s) * rate))
        hi = min(frames, math.ceil((s.end_s + guard_s) * rate))
        if hi > lo:
            raw.setdefault(s.channel, []).append((lo, hi))
    return {ch: merge_intervals(ranges) for ch, ranges in raw.items()}


def redact_samples(
    samples: np.ndarray, rate: int, spans: Iterable[ChannelSpan], mode: Mode = "silence", guard_s: float = GUARD_S
) -> np.ndarray:
    """A copy of ``samples`` (channels x frames, any int or float dtype) with the spans replaced."""
    if samples.ndim != 2:
        raise ValueError(f"samples must be channels x frames, got shape {samples.shape}")
    out = samples.copy()
    for ch, ranges in sample_ranges(spans, rate, samples.shape[1], guard_s).items():
        if not 0 <= ch < samples.shape[0]:
            raise ValueError(f"span on channel {ch} of a {samples.shape[0]}-channel recording")
        for lo, hi in ranges:
            out[ch, lo:hi] = 0 if mode == "silence" else _tone(lo, hi, rate, samples.dtype)
    return out


def _tone(lo: int, hi: int, rate: int, dtype: np.dtype) -> np.ndarray:
    """A 1 kHz sine at -20 dBFS peak over samples [lo, hi), phase from the call's start."""
    full = float(np.iinfo(dtype).max) if np.issubdtype(dtype, np.integer) else 1.0
    amplitude = full * 10 ** (TONE_DBFS / 20)
    wave = amplitude * np.sin(2 * np.pi * TONE_HZ * np.arange(lo, hi) / rate)
    return np.round(wave).astype(dtype) if np.issubdtype(dtype, np.integer) else wave.astype(dtype)
