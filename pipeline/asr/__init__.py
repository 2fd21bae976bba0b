"""Offline speech recognition for call recordings: Whisper in torch, VAD windows, batched decoding.

Public API::

    audio = load_call_audio(data_or_path, roles={0: "agent", 1: "customer"})
    engine = Engine.load(EngineOptions(model="whisper-base", device="cpu"))
    transcripts = engine.transcribe_batch([audio, ...])
"""

from pipeline.asr.audio import CallAudio, load_call_audio
from pipeline.asr.engine import Engine, EngineOptions
from pipeline.asr.errors import AsrError, AudioDecodeError, ChecksumError, DeviceError, ModelNotFoundError, WeightsError
from pipeline.asr.transcript import BatchStats, CallTranscript, EngineStats, Segment
from pipeline.asr.vad import VadOptions

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
