"""Offline speech recognition for call recordings: Whisper in torch, VAD windows, batched decoding.

Public API::

    audio = load_call_audio(data_or_path, roles={0: "agent", 1: "customer"})
    engine = Engine.load(EngineOptions(model="whisper-base", device="cpu"))
    transcripts = engine.transcribe_batch([audio, ...])

The plain data classes and errors load at once; the engine (torch) only when
``Engine``, ``EngineOptions`` or ``VadOptions`` is first used, so a module that
needs only ``CallAudio`` or ``CallTranscript`` does not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipeline.asr.audio import CallAudio, load_call_audio
from pipeline.asr.errors import (
    AsrError,
    AudioDecodeError,
    ChecksumError,
    DeviceError,
    ModelNotFoundError,
    WeightsError,
)
from pipeline.asr.transcript import BatchStats, CallTranscript, EngineStats, Segment

if TYPE_CHECKING:
    from pipeline.asr.engine import Engine, EngineOptions
    from pipeline.asr.vad import VadOptions

_LAZY = {"Engine": "pipeline.asr.engine", "EngineOptions": "pipeline.asr.engine", "VadOptions": "pipeline.asr.vad"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsrError",
    "AudioDecodeError",
    "BatchStats",
    "CallAudio",
    "CallTranscript",
    "ChecksumError",
    "DeviceError",
    "Engine",
    "EngineOptions",
    "EngineStats",
    "ModelNotFoundError",
    "Segment",
    "VadOptions",
    "WeightsError",
    "load_call_audio",
]
