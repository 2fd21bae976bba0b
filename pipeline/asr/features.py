"""Whisper log-mel features in torch, batched, on any device.

Whisper's front end: 16 kHz audio, 25 ms Hann window (400 samples), 10 ms hop
(160), power spectrum, Slaney-normalised mel filters, log10, per-utterance
dynamic range clamp of 8 (in log10 units), then scale to about [-1, 1].
Each row's clamp uses only that row, so a window's features do not depend on
what it is batched with.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

SAMPLE_RATE = 16_000
N_FFT = 400
HOP = 160
FRAMES_PER_S = SAMPLE_RATE // HOP  # 100 mel frames per second


def _hz_to_mel(freq: np.ndarray) -> np.ndarray:
    """Slaney mel scale: linear to 1 kHz, logarithmic above."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    mel = freq / f_sp
    high = freq >= min_log_hz
    mel[high] = min_log_mel + np.log(freq[high] / min_log_hz) / logstep
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    freq = mel * f_sp
    high = mel >= min_log_mel
    freq[high] = min_log_hz * np.exp(logstep * (mel[high] - min_log_mel))
    return freq


def mel_filters(n_mels: int, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
    """Triangular Slaney-normalised filters (n_mels, n_fft // 2 + 1), as Whisper was trained with."""
    fft_hz = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges_mel = np.linspace(_hz_to_mel(np.array([0.0]))[0], _hz_to_mel(np.array([sample_rate / 2]))[0], n_mels + 2)
    edges_hz = _mel_to_hz(edges_mel)
    widths = np.diff(edges_hz)
    ramps = edges_hz[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights *= (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None]
    return weights.astype(np.float32)


class LogMel:
    """Batched log-mel extractor holding its window and filters on one device."""

    def __init__(self, n_mels: int, device: torch.device) -> None:
        self.n_mels = n_mels
        self.window = torch.hann_window(N_FFT, device=device)
        self.filters = torch.from_numpy(mel_filters(n_mels)).to(device)

    def __call__(self, audio: Tensor, n_frames: int) -> Tensor:
        """audio (B, S) float32 at 16 kHz, already zero-padded to n_frames * HOP -> (B, n_mels, n_frames)."""
        spec = torch.stft(audio, N_FFT, HOP, window=self.window, return_complex=True)
        power = spec[..., :n_frames].abs() ** 2
        mel = self.filters @ power
        log_spec = mel.clamp(min=1e-10).log10()
        floor = log_spec.amax(dim=(1, 2), keepdim=True) - 8.0
        log_spec = torch.maximum(log_spec, floor)
        return (log_spec + 4.0) / 4.0
