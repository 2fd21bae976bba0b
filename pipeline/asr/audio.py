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
MAX_PIECE_GAIN = 10.0  # 20 dB
ECHO_CORRELATION = 0.5  # envelopes of a leg and its echo on the other leg, at least


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
    the same gain, so that a party's echo on the other side stays as far below them as it was;
    then a channel still that quiet whose loudness does not follow another channel's (a quiet
    party, not an echo of the other) raised alone. Silero's VAD misses quiet speech (a party
    24 dB under the other on a stereo call lost whole turns), and Whisper's log-mel features are
    not level-free (tools/bench_levels.py measures both on calls 20-40 dB down). Other calls are
    returned as they were."""
    peak = max(float(samples.max()), -float(samples.min()))
    if peak == 0.0:
        return samples
    gain = min(TARGET_PEAK / peak, MAX_GAIN) if peak < QUIET_PEAK else 1.0
    if gain != 1.0:
        samples = samples * np.float32(gain)
    if samples.shape[0] < 2:
        return samples
    peaks = np.abs(samples).max(axis=1)
    quiet = [ch for ch in range(samples.shape[0]) if 0.0 < peaks[ch] < QUIET_PEAK and not _echoes(samples, ch)]
    if not quiet:
        return samples
    out = samples.copy()
    for ch in quiet:
        out[ch] *= np.float32(min(TARGET_PEAK / float(peaks[ch]), MAX_GAIN / gain))  # 40 dB in all at most
    return out


def piece_gain(piece: np.ndarray) -> float:
    """The gain a stretch of speech (a VAD region) is encoded with: one peaking under ``QUIET_PEAK``
    is brought to ``TARGET_PEAK``, by ``MAX_PIECE_GAIN`` at most. On a mono mix the quieter party
    cannot be raised by a channel's gain without the louder one: a party 21 dB under the other was
    found by the VAD but decoded to no text."""
    peak = float(np.abs(piece).max()) if piece.size else 0.0
    return min(TARGET_PEAK / peak, MAX_PIECE_GAIN) if 0.0 < peak < QUIET_PEAK else 1.0


def _echoes(samples: np.ndarray, ch: int) -> bool:
    """Whether channel ``ch``'s loudness follows another channel's (a leg carrying the other
    party's echo): their 50 ms log-energy envelopes correlate. Two parties take turns, so their
    envelopes do not (at most about zero); line noise alone is flat and follows nothing."""
    own = _envelope(samples[ch])
    for other in range(samples.shape[0]):
        if other != ch and float(np.corrcoef(own, _envelope(samples[other]))[0, 1]) >= ECHO_CORRELATION:
            return True
    return False


def _envelope(channel: np.ndarray, frame: int = 800) -> np.ndarray:
    """Log energy per ``frame`` samples (50 ms at 16 kHz)."""
    n = channel.size // frame
    frames = channel[: n * frame].reshape(n, frame) if n else channel[None, :]
    return np.log10(np.einsum("ij,ij->i", frames, frames) + 1e-10)


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
