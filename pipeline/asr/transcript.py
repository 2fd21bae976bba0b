"""What the engine returns: per-call transcripts of per-role segments, and batch statistics."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Segment:
    """One stretch of speech of one party, times in seconds from the call's start.

    words: (start_s, end_s, text) of each word in call time, where word timing ran for this
    segment (:mod:`pipeline.asr.alignment`); None where it did not."""

    role: str
    channel: int
    start_s: float
    end_s: float
    text: str
    language: str = ""
    role_confidence: float | None = None  # a mono call's separated role: how sure (None: the channel's own role)
    words: tuple[tuple[float, float, str], ...] | None = None


# why speech the VAD heard has no text: Whisper's no-speech rule; decodes that kept looping from
# its start; a decode that stepped over it (another voice) or stopped before it, with no pass left;
# faint speech, heard only with the line's noise taken out and not decoded (pipeline/asr/vad.py)
DropReason = Literal["no_speech", "loop", "stepped_over", "unfinished", "faint"]


@dataclass(frozen=True, order=True)
class Untranscribed:
    """A stretch of one channel, in call time, where the VAD heard speech and no text came out."""

    channel: int
    start_s: float
    end_s: float
    why: DropReason


@dataclass(frozen=True)
class CallTranscript:
    """segments: sorted by start_s; languages: channel -> detected (or forced) code, only for
    channels with speech; language_probs: channel -> the model's probability for that language
    (over its windows, by their speech); unsupported: channel -> language, for channels whose
    language is outside the engine's candidate languages (transcribed in that language, and to
    be said so downstream); untranscribed: speech the VAD heard that has no text, and why
    (counted, never dropped quietly); timings: seconds spent per stage (vad_s, resample_s, asr_s share)."""

    call_id: str
    segments: list[Segment]
    languages: dict[int, str]
    model_name: str
    model_version: str
    timings: dict[str, float]
    duration_s: float
    language_probs: dict[int, float] = field(default_factory=dict)
    unsupported: dict[int, str] = field(default_factory=dict)
    untranscribed: list[Untranscribed] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segments)

    def text_of(self, role: str) -> str:
        return " ".join(s.text for s in self.segments if s.role == role)


@dataclass(frozen=True)
class BatchStats:
    """One model batch: shape, padding efficiency, time and device memory after it ran."""

    items: int
    bucket_s: float
    audio_s: float  # window seconds (speech, pauses kept inside pieces, gaps at joins)
    speech_s: float  # voiced seconds per VAD
    computed_s: float  # items x bucket length
    encode_s: float
    # zero where a batch ran no decoder or on no device memory (the simulated engine, test fakes)
    decode_s: float = 0.0
    decode_steps: int = 0
    decode_row_steps: int = 0
    compactions: int = 0
    memory_allocated_bytes: int = 0
    memory_reserved_bytes: int = 0
    memory_peak_bytes: int = 0

    @property
    def padding_efficiency(self) -> float:
        """Speech seconds ÷ padded seconds computed (pauses and joins count as waste)."""
        return self.speech_s / self.computed_s if self.computed_s else 1.0

    @property
    def window_efficiency(self) -> float:
        """Window seconds ÷ padded seconds computed (only the bucket padding counts as waste)."""
        return self.audio_s / self.computed_s if self.computed_s else 1.0


class EngineStats:
    """Running totals over the engine's life plus the most recent batches (bounded for long runs)."""

    def __init__(self, keep_batches: int = 10_000) -> None:
        self.batches: deque[BatchStats] = deque(maxlen=keep_batches)
        self.reset()

    def add(self, batch: BatchStats) -> None:
        self.batches.append(batch)
        self.n_batches += 1
        self.audio_s += batch.audio_s
        self.speech_s += batch.speech_s
        self.computed_s += batch.computed_s

    @property
    def padding_efficiency(self) -> float:
        """Speech seconds ÷ padded seconds computed, over all batches."""
        return self.speech_s / self.computed_s if self.computed_s else 1.0

    @property
    def window_efficiency(self) -> float:
        return self.audio_s / self.computed_s if self.computed_s else 1.0

    def reset(self) -> None:
        self.batches.clear()
        self.n_batches = 0
        self.redecoded_windows = 0  # windows (or their rests) decoded again after a loop or cut-off
        self.skipped_pieces = 0  # speech pieces a decode stepped over, decoded again on their own
        self.rewound_windows = 0  # windows read again from an earlier turn, then decoded piece by piece
        self.undecoded_pieces = 0  # ... still stepped over at the last pass: speech with no text
        self.no_speech_windows = 0  # windows dropped by the no-speech rule
        self.audio_s = self.speech_s = self.computed_s = 0.0
