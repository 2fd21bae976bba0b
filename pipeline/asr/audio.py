"""Call audio: decode bytes or a file into per-channel samples labelled by role.

Stereo call recordings carry one party per channel (the RoutedCall says which);
mono recordings are one "mixed" speaker, and so are two channels that carry one
signal (:func:`merge_copied_channels`). Samples stay at the recorded rate
here; :func:`resample` brings them to the model's 16 kHz with soxr (a
maintained, high-quality resampler), which is cheap next to the model.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from pipeline.asr.errors import AudioDecodeError

MIXED_ROLE = "mixed"
# Two channels this correlated, at levels this close, carry one signal. A party's voice leaking
# into the other side (echo, crosstalk) is 20 dB or more below it, and two parties' speech is
# nearly uncorrelated.
COPY_CORRELATION = 0.99
COPY_LEVEL_RATIO = 2.0
QUIET_PEAK = 0.1  # -20 dBFS: a call that never gets louder than this is brought up
TARGET_PEAK = 0.5  # -6 dBFS
MAX_GAIN = 100.0  # 40 dB: below that it is line noise, not a quiet call


@dataclass(frozen=True, eq=False)
class CallAudio:
    """One call's audio.

    samples: float32 (channels, frames) in [-1, 1] at ``sample_rate``.
    roles: one role name per channel (e.g. "agent", "customer", "mixed").
    """

    call_id: str
    samples: np.ndarray
    sample_rate: int
    roles: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.samples.ndim != 2 or self.samples.dtype != np.float32:
            raise AudioDecodeError(f"call {self.call_id}: samples must be float32 (channels, frames)")
        if len(self.roles) != self.samples.shape[0]:
            raise AudioDecodeError(
                f"call {self.call_id}: {len(self.roles)} roles for {self.samples.shape[0]} channels"
            )
        if self.sample_rate <= 0:
            raise AudioDecodeError(f"call {self.call_id}: invalid sample rate {self.sample_rate}")

    @property
    def channels(self) -> int:
        return int(self.samples.shape[0])

    @property
    def duration_s(self) -> float:
        return self.samples.shape[1] / self.sample_rate


def roles_for(channels: int, roles: Mapping[int, str] | None) -> tuple[str, ...]:
    if channels == 1:
        return (roles[0],) if roles and len(roles) == 1 and 0 in roles else (MIXED_ROLE,)
    roles = roles or {}
    return tuple(roles.get(ch, f"channel{ch}") for ch in range(channels))


def channels_of(frames: np.ndarray, roles: Mapping[int, str] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Decoded (frames, channels) samples as (channels, frames) with each channel's role, two
    channels carrying one signal merged (:func:`merge_copied_channels`); both decoders end here."""
    return merge_copied_channels(np.ascontiguousarray(frames.T), roles_for(frames.shape[1], roles))


def merge_copied_channels(samples: np.ndarray, roles: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Two channels that carry one signal (a mono mix written to both sides, as some recorders and
    exports do) become one "mixed" channel: decoded apart, every sentence would be transcribed
    twice, once under each role, and the parties would seem to talk over each other throughout.
    Anything else is returned as it was."""
    if samples.shape[0] != 2:
        return samples, roles
    left, right = samples[0], samples[1]
    energy_l, energy_r = float(np.dot(left, left)), float(np.dot(right, right))
    if energy_l == 0.0 or energy_r == 0.0:
        return samples, roles  # a silent side is not a copy
    if not 1 / COPY_LEVEL_RATIO**2 <= energy_l / energy_r <= COPY_LEVEL_RATIO**2:
        return samples, roles
    if float(np.dot(left, right)) / np.sqrt(energy_l * energy_r) < COPY_CORRELATION:
        return samples, roles
    return ((left + right) * np.float32(0.5))[None, :], (MIXED_ROLE,)


def at_speech_level(samples: np.ndarray) -> np.ndarray:
    """A quiet call (peak under ``QUIET_PEAK``) raised to a ``TARGET_PEAK`` peak, every channel by
    the same gain, so that a party's echo on the other side stays as far below them as it was.
    Silero's VAD misses the first words of quiet speech, and Whisper's log-mel features are not
    level-free (tools/bench_levels.py measures both on calls 20-40 dB down). Other calls are
    returned as they were."""
    peak = max(float(samples.max()), -float(samples.min()))
    if peak == 0.0 or peak >= QUIET_PEAK:
        return samples
    return samples * np.float32(min(TARGET_PEAK / peak, MAX_GAIN))


def load_call_audio(
    data_or_path: bytes | str | Path,
    roles: Mapping[int, str] | None = None,
    call_id: str | None = None,
) -> CallAudio:
    """Decode WAV/FLAC/OGG bytes or a path into a :class:`CallAudio`.

    roles maps channel index -> role; a mono file is one "mixed" speaker unless
    exactly one role is given. Raises :class:`AudioDecodeError` on corrupt,
    empty or unsupported audio.
    """
    if isinstance(data_or_path, (bytes, bytearray, memoryview)):
        source: io.BytesIO | str = io.BytesIO(bytes(data_or_path))
        default_id = hashlib.sha256(bytes(data_or_path)).hexdigest()[:16]
    else:
        source = str(data_or_path)
        default_id = Path(data_or_path).stem
    try:
        frames, rate = sf.read(source, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioDecodeError(f"cannot decode audio {call_id or default_id}: {exc}") from exc
    if frames.shape[0] == 0:
        raise AudioDecodeError(f"audio {call_id or default_id} has no samples")
    samples, channel_roles = channels_of(frames, roles)
    return CallAudio(call_id=call_id or default_id, samples=samples, sample_rate=int(rate), roles=channel_roles)


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """(channels, frames) float32 at rate_in -> (channels, frames') float32 at rate_out."""
    if rate_in == rate_out:
        return samples
    out = soxr.resample(samples.T, rate_in, rate_out, quality="HQ")
    return np.ascontiguousarray(np.asarray(out, dtype=np.float32).reshape(-1, samples.shape[0]).T)
