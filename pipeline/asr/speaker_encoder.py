"""Speaker embeddings of 16 kHz speech: the GE2E encoder whose weights ship in ``resemblyzer``'s wheel.

Only the weights file (``resemblyzer/pretrained.pt``, Apache-2.0) is used: it is found through the
installed distribution's metadata, so the ``resemblyzer`` package itself (which imports librosa
and webrtcvad) is never imported. The network is a 3-layer LSTM over 40-band mel power frames
(25 ms window, 10 ms step) whose last hidden state goes through a linear layer and a ReLU and is
L2-normalised: a 256-d embedding whose cosine similarity compares voices.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import torch
from torch import nn

from pipeline.asr.errors import AsrError

RATE = 16_000
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
N_MELS = 40
EMBED_DIM = 256
TARGET_DBFS = -30.0  # every window brought to this level first: the mel power is not level-invariant
WEIGHTS_DIST = "resemblyzer"
WEIGHTS_FILE = "resemblyzer/pretrained.pt"


def weights_path() -> Path:
    """The installed encoder weights (a file of the ``resemblyzer`` distribution, not imported)."""
    try:
        path = Path(str(importlib.metadata.distribution(WEIGHTS_DIST).locate_file(WEIGHTS_FILE)))
    except importlib.metadata.PackageNotFoundError as e:
        raise AsrError("speaker separation needs the resemblyzer wheel (its encoder weights)") from e
    if not path.is_file():
        raise AsrError(f"speaker encoder weights missing: {path}")
    return path


def slaney_mel_filters(n_mels: int = N_MELS, n_fft: int = N_FFT, rate: int = RATE) -> np.ndarray:
    """(n_mels, n_fft // 2 + 1) triangular filters on the Slaney mel scale, area-normalised
    (the filterbank the encoder was trained on)."""

    def to_mel(hz: np.ndarray) -> np.ndarray:
        lin = hz / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(hz >= 1000.0, log, lin)

    def to_hz(mel: np.ndarray) -> np.ndarray:
        lin = mel * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0))
        return np.where(mel >= 15.0, log, lin)

    fft_hz = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    edges = to_hz(np.linspace(to_mel(np.array(0.0)), to_mel(np.array(rate / 2)), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    return (filters * (2.0 / (edges[2:] - edges[:-2]))[:, None]).astype(np.float32)


class _GE2E(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(N_MELS, EMBED_DIM, num_layers=3, batch_first=True)
        self.linear = nn.Linear(EMBED_DIM, EMBED_DIM)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """mels (n, frames, 40) -> (n, 256) unit vectors."""
        _, (hidden, _) = self.lstm(mels)
        raw = torch.relu(self.linear(hidden[-1]))
        return raw / raw.norm(dim=1, keepdim=True).clamp_min(1e-9)


class SpeakerEncoder:
    """Embeds windows of one 16 kHz stream (CPU; the LSTM is small: about 1 ms per second of audio)."""

    def __init__(self, path: Path | None = None) -> None:
        checkpoint = torch.load(path or weights_path(), map_location="cpu", weights_only=False)
        state = {k: v for k, v in checkpoint["model_state"].items() if k.split(".")[0] in ("lstm", "linear")}
        self.model = _GE2E()
        self.model.load_state_dict(state)
        self.model.eval()
        self.filters = torch.from_numpy(slaney_mel_filters())
        self.window = torch.hann_window(N_FFT)

    def _mel(self, samples: np.ndarray) -> torch.Tensor:
        audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
        rms = float(audio.pow(2).mean().sqrt())
        if rms > 1e-6:
            audio = audio * (10 ** (TARGET_DBFS / 20) / rms)
        spec = (
            torch.stft(audio, N_FFT, HOP, window=self.window, center=True, pad_mode="constant", return_complex=True)
            .abs()
            .pow(2)
        )
        return (self.filters @ spec).T  # (frames, 40)

    @torch.inference_mode()
    def embed(self, stream: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
        """Sample ranges of ``stream`` -> (len(spans), 256) unit embeddings; spans of equal length
        run as one batch."""
        out = np.zeros((len(spans), EMBED_DIM), dtype=np.float32)
        by_length: dict[int, list[int]] = {}
        for i, (start, end) in enumerate(spans):
            by_length.setdefault(end - start, []).append(i)
        for rows in by_length.values():
            mels = torch.stack([self._mel(stream[spans[i][0] : spans[i][1]]) for i in rows])
            out[rows] = self.model(mels).numpy()
        return out
