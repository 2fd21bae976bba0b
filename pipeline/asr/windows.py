"""What the engine's later passes run on: the engine's model, tokenizer, memory pool and first-pass
decoder, its batch planner and its encoder.

The number pass (:mod:`pipeline.asr.number_pass`) and the word aligner (:mod:`pipeline.asr.alignment`)
decode or align windows of their own with the engine's weights and memory. They take a
:class:`WindowRunner`, which :class:`pipeline.asr.engine.Engine` is, rather than the engine itself:
the engine builds them, so they never import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np
import torch

from pipeline.asr.decode import GreedyDecoder
from pipeline.asr.memory import MemoryPool
from pipeline.asr.model import Whisper
from pipeline.asr.packing import PackedWindow
from pipeline.asr.tokenizer import WhisperTokenizer
from pipeline.batching import MixedBatch


class Encodable(Protocol):
    """A window the engine can plan and encode: pieces of one 16 kHz channel packed into one window."""

    @property
    def packed(self) -> PackedWindow: ...

    @property
    def stream(self) -> np.ndarray: ...

    @property
    def duration_s(self) -> float: ...


W = TypeVar("W", bound=Encodable)


class WindowRunner(Protocol):
    model: Whisper
    tokenizer: WhisperTokenizer
    pool: MemoryPool
    decoder: GreedyDecoder  # the first pass's: its cross-attention fill serves the aligner

    def plan_windows(self, windows: Sequence[W]) -> list[MixedBatch[W]]:
        """Longest first, each window at its own bucket, as many per batch as the pool holds."""
        ...

    def encode_windows(self, bucket_s: float, windows: Sequence[Encodable]) -> torch.Tensor:
        """Windows padded to one bucket -> encoder output (n, T, D)."""
        ...

    def text_of(self, tokens: list[int], language: str) -> str:
        """Token ids -> text as the first pass writes it (simplified Chinese where set)."""
        ...
