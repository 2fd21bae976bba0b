"""Voice activity: silero-vad speech regions of a 16 kHz channel.

Whisper invents text on silence, so only speech ever reaches the model: a
channel without speech yields no region and so no window at all
(:mod:`pipeline.asr.packing` joins the regions into windows). A single region
longer than ``max_window_s`` is split by silero itself at its longest
internal pause (a hard cut only when the speaker never pauses).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from pipeline.asr.errors import AsrError
from pipeline.intervals import subtract_intervals

VAD_RATE = 16_000


@dataclass(frozen=True)
class VadOptions:
    threshold: float = 0.5
    min_speech_ms: int = 250
    min_silence_ms: int = 100
    speech_pad_ms: int = 60
    # more kept before a region than after it: 60 ms clipped the first syllable of turns on
    # band-limited, codec'd speech; padding the end as much invents words in the silence
    # after a turn (pipeline/asr/README.md, "VAD pad")
    onset_pad_ms: int = 200
    max_window_s: float = 30.0
    # also look for speech with the channel's stationary noise taken out (without_stationary_noise),
    # reported as faint speech where the channel as recorded shows none
    faint_speech: bool = True


def onsets_widened(regions: list[tuple[int, int]], extra: int) -> list[tuple[int, int]]:
    """Each region started ``extra`` samples earlier, never before 0 nor into the previous region."""
    out: list[tuple[int, int]] = []
    for start, end in regions:
        floor = out[-1][1] if out else 0
        out.append((max(floor, min(start, start - extra)), end))
    return out


# Stationary line noise (hiss) can drown a quiet party: on a 16 kHz mono mix whose second party spoke
# 23 dB under the first over white noise 17 dB under it (tools/bench_corpus dev seed 223, call 5),
# silero gave that party's turns a probability near 0 and 17 of its 18 turns had no output, with
# nothing said about it. With the noise taken out by spectral subtraction, 14 of the 18 turns read
# above 0.5. Decoded, those turns came out as invented text ("I can't see the number of people at
# home"), from the recorded audio and from the cleaned copy alike, and the dev part's WER rose
# (45.7 -> 46.5 %): so such faint speech is reported (untranscribed, "faint"), not decoded.
NOISE_WITHIN_DB = 30.0  # looked for where the noise floor is this close to the channel's loud frames
NOISE_SHARE = 0.2  # a frequency bin's noise: its power at this quantile of the block's frames
OVER_SUBTRACTION = 3.0
GAIN_FLOOR = 0.02
NOISE_BLOCK_S = 60.0  # noise is estimated per block: a line's noise drifts over a long call
_FFT, _HOP = 512, 128


def noise_margin_db(samples: np.ndarray) -> float:
    """How far a channel's quietest frames (the ``NOISE_SHARE`` quantile of 32 ms frames) lie under
    its loud ones (the 0.9 quantile), in dB: inf where the quiet ones are digital silence."""
    frames = samples[: samples.size // 512 * 512].reshape(-1, 512)
    if not frames.size:
        return math.inf
    quiet, loud = np.quantile(np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1)), [NOISE_SHARE, 0.9])
    return 20 * math.log10(loud / quiet) if quiet > 0 else math.inf


def without_stationary_noise(samples: np.ndarray) -> np.ndarray:
    """``samples`` (16 kHz) with each frequency bin's stationary noise subtracted (per
    ``NOISE_BLOCK_S`` block, over-subtracted, gains floored), for VAD only. numpy, not torch: torch's
    STFT on the VAD's threads left every later decode of the process 15-40 % slower in wall time at
    the same CPU time (pipeline/asr/README.md, step 6; the cause inside torch was not looked into)."""
    window = np.hanning(_FFT + 1)[:-1].astype(np.float32)  # periodic: its squares at hop _FFT/4 sum flat
    block = int(NOISE_BLOCK_S * VAD_RATE)
    out = samples.astype(np.float32, copy=True)
    for start in range(0, samples.size, block):
        piece = out[start : start + block]
        if piece.size < 4 * _FFT:
            continue
        spec = np.fft.rfft(np.lib.stride_tricks.sliding_window_view(piece, _FFT)[::_HOP] * window, axis=1)
        power = spec.real**2 + spec.imag**2
        k = max(0, int(NOISE_SHARE * len(power)) - 1)
        noise = np.partition(power, k, axis=0)[k]
        gain = np.maximum(1 - OVER_SUBTRACTION * noise / np.maximum(power, 1e-12), GAIN_FLOOR)
        frames = np.fft.irfft(spec * gain, _FFT, axis=1) * window
        # overlap-add: frames g, g + 4, g + 8, ... tile the piece from g hops on without overlapping
        summed, weight = np.zeros(piece.size), np.zeros(piece.size)
        for g in range(_FFT // _HOP):
            tiles = frames[g :: _FFT // _HOP].ravel()
            at = slice(g * _HOP, g * _HOP + tiles.size)
            summed[at] += tiles
            weight[at] += np.tile(window**2, len(frames[g :: _FFT // _HOP]))
        full = weight > 0.1  # the edges, under fewer than two frames, keep the recording
        piece[full] = summed[full] / weight[full]
    return out


MIN_FAINT_S = 1.0  # shorter faint stretches are a breath or the noise's own swell, no turn
_FRAME = 512  # silero's frame at 16 kHz: probability k is of samples [k * _FRAME, (k + 1) * _FRAME)
_LEAD_FRAMES = 16  # read before each gap (0.5 s), so that silero's state has settled where the gap starts


@dataclass(frozen=True)
class ChannelSpeech:
    """A channel's speech regions in samples (decoded), and faint speech: heard only with the line's
    stationary noise taken out, outside every region (reported, not decoded)."""

    regions: list[tuple[int, int]]
    faint: list[tuple[int, int]] = field(default_factory=list)


class SileroVad:
    """Speech regions of 16 kHz mono streams with silero-vad's sequence ONNX model (CPU).

    The sequence model gives the same per-frame probabilities as the streaming
    model in one ONNX call per ~16 s block instead of a Python step per 32 ms
    frame (about 5x faster here), and releases the GIL. Each channel's reading is one sequential
    chain (the model's state runs through it on one thread), so every channel of every call goes
    on the pool at once: a mono call's one channel, done call by call, left a core idle.
    """

    def __init__(self, opts: VadOptions) -> None:
        if opts.max_window_s <= 1.0:
            raise AsrError("max_window_s must exceed 1 s")
        import torch

        threads = torch.get_num_threads()
        from silero_vad import load_silero_vad  # its first import sets torch to one thread for the process
        from silero_vad.utils_vad import get_speech_timestamps_from_probs

        torch.set_num_threads(threads)  # the encoder and decoder keep every core they were given

        self.opts = opts
        self.model = load_silero_vad(sequence=True)
        self._to_regions = get_speech_timestamps_from_probs
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="vad")

    def regions(self, samples: np.ndarray) -> list[tuple[int, int]]:
        """samples (frames,) float32 at 16 kHz -> [(start, end)] speech regions in samples."""
        return self.speech(samples).regions

    def speech(self, samples: np.ndarray) -> ChannelSpeech:
        """A channel's speech regions, and its faint speech (where its noise floor is within
        ``NOISE_WITHIN_DB`` of its loud frames)."""
        return self.calls_speech([samples[None]])[0][0]

    def channel_speech(self, channels: np.ndarray) -> list[ChannelSpeech]:
        """channels (C, frames) float32 at 16 kHz -> the speech of each channel."""
        return self.calls_speech([channels])[0]

    def calls_speech(self, calls: list[np.ndarray]) -> list[list[ChannelSpeech]]:
        """Each call's channels (C, frames) float32 at 16 kHz -> the speech of each channel of each
        call. The faint search of a channel follows its regions (it reads only the gaps between them)."""
        read = [[self._pool.submit(self._read, np.ascontiguousarray(ch, dtype=np.float32)) for ch in c] for c in calls]
        faint = [
            [self._pool.submit(self._faint, ch, *r.result()) if self._wants_faint(ch) else None for ch, r in zip(c, rs)]
            for c, rs in zip(calls, read, strict=True)
        ]
        return [
            [ChannelSpeech(r.result()[1], f.result() if f is not None else []) for r, f in zip(rs, fs, strict=True)]
            for rs, fs in zip(read, faint, strict=True)
        ]

    def channel_regions(self, channels: np.ndarray) -> list[list[tuple[int, int]]]:
        """channels (C, frames) float32 at 16 kHz -> speech regions of each channel."""
        return [s.regions for s in self.channel_speech(channels)]

    def _read(self, samples: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """A channel's per-frame speech probabilities and its regions."""
        if samples.size < _FRAME:
            return np.zeros(0, np.float32), []
        probs = self.model.audio_forward(samples, VAD_RATE)
        return probs, self._regions(probs, samples.size)

    def _wants_faint(self, samples: np.ndarray) -> bool:
        return self.opts.faint_speech and samples.size >= _FRAME and noise_margin_db(samples) <= NOISE_WITHIN_DB

    def _faint(self, samples: np.ndarray, raw: np.ndarray, regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Speech heard with the stationary noise taken out, outside ``regions`` and ``MIN_FAINT_S``
        or longer. Silero reads the cleaned copy over the gaps only (each from ``_LEAD_FRAMES``
        before it): inside a region the raw reading already decides."""
        least = int(MIN_FAINT_S * VAD_RATE)
        gaps = [(a, b) for a, b in subtract_intervals([(0, samples.size)], regions) if b - a >= least]
        if not gaps:
            return []
        cleaned = without_stationary_noise(samples)
        probs = raw.copy()
        for a, b in gaps:
            first, last = max(0, a // _FRAME - _LEAD_FRAMES), min(raw.size, -(-b // _FRAME))
            read = self.model.audio_forward(cleaned[first * _FRAME : last * _FRAME], VAD_RATE)[: last - first]
            np.maximum(probs[first:last], read, out=probs[first:last])
        heard = self._regions(probs, samples.size)
        return [(a, b) for a, b in subtract_intervals(heard, regions) if b - a >= least]

    def _regions(self, probs: np.ndarray, size: int) -> list[tuple[int, int]]:
        o = self.opts
        found = self._to_regions(
            probs.tolist(),
            sampling_rate=VAD_RATE,
            threshold=o.threshold,
            min_speech_duration_ms=o.min_speech_ms,
            min_silence_duration_ms=o.min_silence_ms,
            speech_pad_ms=o.speech_pad_ms,
            max_speech_duration_s=o.max_window_s,
            audio_length_samples=size,
        )
        return onsets_widened(
            [(int(r["start"]), min(int(r["end"]), size)) for r in found],
            (o.onset_pad_ms - o.speech_pad_ms) * VAD_RATE // 1000,
        )
