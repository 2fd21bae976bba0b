"""Typed errors of the ASR engine, all under :class:`pipeline.errors.CallQAError`.

Bad input audio is a :class:`~pipeline.errors.DecodeError` (the call is
dead-lettered); broken model files and device problems are :class:`AsrError`
(the worker must not start).
"""

from pipeline.errors import CallQAError, DecodeError


class AsrError(CallQAError):
    """The engine cannot run: model files, device or configuration."""


class AudioDecodeError(DecodeError):
    """Call audio is corrupt, empty or in an unsupported format."""


class WeightsError(AsrError):
    """Model files are missing, unreadable or inconsistent with the model."""


class ChecksumError(WeightsError):
    """A model file's sha256 differs from the pinned value (tampered or truncated)."""


class ModelNotFoundError(WeightsError):
    """No registry entry or local directory matches the configured model name."""


class DeviceError(AsrError):
    """The requested device type is not available in this torch build."""
