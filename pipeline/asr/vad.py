"""Voice activity: silero-vad speech regions -> model windows of at most 30 s.

Whisper invents text on silence, so only speech ever reaches the model: a
channel without speech yields no window at all. Regions closer than
``max_gap_s`` are merged into one window (fewer, fuller windows) until the
window would exceed ``max_window_s``; a longer pause or a full window starts a
new one, so windows are always cut at pauses. A single region longer than the
window limit is split by silero itself at its longest internal pause (a hard
cut only when the speaker never pauses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pipeline.asr.errors import AsrError

VAD_RATE = 16_000


def _load_silero() -> torch.jit.ScriptModule:
    # importing silero_vad sets torch's global thread count to 1; undo that
    threads = torch.get_num_threads()
    from silero_vad import load_silero_vad

    torch.set_num_threads(threads)
    return load_silero_vad(onnx=False)


@dataclass(frozen=True)
class VadOptions:
    threshold: float = 0.5
    min_speech_ms: int = 250
    min_silence_ms: int = 100
    speech_pad_ms: int = 60
    max_gap_s: float = 1.0
    max_window_s: float = 30.0


@dataclass(frozen=True)
class SpeechWindow:
    """A span of one channel to transcribe, in samples at 16 kHz (call time)."""

    start: int
    end: int
    speech_s: float  # voiced seconds inside the window

    @property
    def start_s(self) -> float:
        return self.start / VAD_RATE

    @property
    def end_s(self) -> float:
        return self.end / VAD_RATE

    @property
    def duration_s(self) -> float:
        return (self.end - self.start) / VAD_RATE


class SileroVad:
    """Speech regions of 16 kHz mono streams with the silero-vad torch model (CPU)."""

    def __init__(self, opts: VadOptions) -> None:
        if opts.max_window_s <= 1.0:
            raise AsrError("max_window_s must exceed 1 s")
        self.opts = opts
        self.model = _load_silero()
        from silero_vad.utils_vad import get_speech_timestamps_from_probs

        self._to_regions = get_speech_timestamps_from_probs

    def regions(self, samples: np.ndarray) -> list[tuple[int, int]]:
        """samples (frames,) float32 at 16 kHz -> [(start, end)] speech regions in samples."""
        if samples.size < 512:
            return []
        o = self.opts
        self.model.reset_states()
        # Silence drives the recurrent state into denormal floats, which run ~10x slower on CPU;
        # and TorchScript's profiling re-optimisation makes the first long inputs slow. Avoid both.
        # The model steps through 32 ms chunks of tiny ops: extra intra-op threads only add
        # synchronisation (10x slower on a busy host), so it runs on one.
        torch.set_flush_denormal(True)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.inference_mode(), torch.jit.optimized_execution(False):
                probs = self.model.audio_forward(torch.from_numpy(samples)[None], VAD_RATE)[0]
        finally:
            torch.set_num_threads(threads)
        found = self._to_regions(
            probs.tolist(),
            sampling_rate=VAD_RATE,
            threshold=o.threshold,
            min_speech_duration_ms=o.min_speech_ms,
            min_silence_duration_ms=o.min_silence_ms,
            speech_pad_ms=o.speech_pad_ms,
            max_speech_duration_s=o.max_window_s,
            audio_length_samples=int(samples.size),
        )
        return [(int(r["start"]), min(int(r["end"]), samples.size)) for r in found]

    def windows(self, samples: np.ndarray) -> list[SpeechWindow]:
        """Speech windows of one channel, in order."""
        return merge_regions(self.regions(samples), self.opts.max_gap_s, self.opts.max_window_s)


def merge_regions(regions: list[tuple[int, int]], max_gap_s: float, max_window_s: float) -> list[SpeechWindow]:
    """Merge sorted speech regions (samples) into windows cut only at pauses.

    A region longer than ``max_window_s`` is hard-split (callers normally
    prevent that by asking silero to split at pauses first).
    """
    max_gap, max_len = int(max_gap_s * VAD_RATE), int(max_window_s * VAD_RATE)
    pieces: list[tuple[int, int]] = []
    for start, end in regions:
        while end - start > max_len:
            pieces.append((start, start + max_len))
            start += max_len
        if end > start:
            pieces.append((start, end))
    windows: list[SpeechWindow] = []
    cur: list[tuple[int, int]] = []
    for start, end in pieces:
        if cur and (start - cur[-1][1] > max_gap or end - cur[0][0] > max_len):
            windows.append(_window(cur))
            cur = []
        cur.append((start, end))
    if cur:
        windows.append(_window(cur))
    return windows


def _window(regions: list[tuple[int, int]]) -> SpeechWindow:
    speech = sum(e - s for s, e in regions) / VAD_RATE
    return SpeechWindow(start=regions[0][0], end=regions[-1][1], speech_s=speech)
