"""SIMULATED object storage: synthetic recordings named by their key, generated on read, never stored.

A generated night names each recording ``<prefix>/<index>-<duration ms>-<channels>-<rate>[-<fault>].wav``
(:func:`key_for`). The store serves any such key as an 8-bit µ-law WAV of that length: a real
header, so the router's probe and the worker's fetch + decode run unchanged, and a silent body
made on each read. A fault in the key makes a bad input the real stages must dead-letter:
``empty`` (a 0-byte object), ``trunc`` (a data chunk that declares more than the object holds),
``noise`` (bytes that are no audio). Any other key is a missing object.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass

from pipeline.events import ObjectRef
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectInfo

FAULTS = ("empty", "trunc", "noise")
_KEY = re.compile(r"(?:.*/)?(\d+)-(\d+)-(\d+)-(\d+)(?:-(empty|trunc|noise))?\.wav")
_HEADER_BYTES = 44
_ULAW_SILENCE = b"\xff"  # µ-law code of a zero sample


@dataclass(frozen=True)
class SimulatedRecording:
    index: int
    duration_s: float
    channels: int
    rate: int
    fault: str | None = None

    @property
    def frames(self) -> int:
        return round(self.duration_s * self.rate)

    @property
    def size_bytes(self) -> int:
        if self.fault == "empty":
            return 0
        if self.fault == "noise":
            return 4096
        data = self.frames * self.channels
        return _HEADER_BYTES + (data // 2 if self.fault == "trunc" else data)

    def header(self) -> bytes:
        data_bytes = self.frames * self.channels  # one byte per sample; "trunc" holds only half of it
        return (
            b"RIFF"
            + struct.pack("<I", 36 + data_bytes)
            + b"WAVE"
            + b"fmt "
            + struct.pack("<IHHIIHH", 16, 7, self.channels, self.rate, self.rate * self.channels, self.channels, 8)
            + b"data"
            + struct.pack("<I", data_bytes)
        )

    def read(self, offset: int, length: int | None) -> bytes:
        """Bytes ``[offset, offset + length)`` of the object, generated now."""
        size = self.size_bytes
        end = size if length is None else min(size, offset + length)
        if offset >= end:
            return b""
        if self.fault == "noise":
            return hashlib.shake_256(str(self.index).encode()).digest(size)[offset:end]
        head = self.header()
        body_from = max(offset, _HEADER_BYTES)
        return head[offset:end] + _ULAW_SILENCE * max(0, end - body_from)


def key_for(prefix: str, rec: SimulatedRecording) -> str:
    fault = f"-{rec.fault}" if rec.fault else ""
    return f"{prefix}/{rec.index:07d}-{round(rec.duration_s * 1000)}-{rec.channels}-{rec.rate}{fault}.wav"


def parse_key(key: str) -> SimulatedRecording | None:
    m = _KEY.fullmatch(key)
    if m is None:
        return None
    index, ms, channels, rate, fault = m.groups()
    return SimulatedRecording(int(index), int(ms) / 1000, int(channels), int(rate), fault)


def etag_of(key: str) -> str:
    return hashlib.md5(key.encode()).hexdigest()  # noqa: S324 - an identity, not a security check


class SimulatedStore:
    """:class:`pipeline.stages.storage.ObjectStore` over the synthetic recordings of a night."""

    def _recording(self, ref: ObjectRef) -> SimulatedRecording:
        rec = parse_key(ref.key)
        if rec is None:
            raise MissingObject(f"{ref.bucket}/{ref.key}: not a simulated recording")
        return rec

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        rec = self._recording(ref)
        return ObjectInfo(rec.size_bytes, etag_of(ref.key), None, {})

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        rec = self._recording(ref)
        if ref.etag and ref.etag.strip('"') != etag_of(ref.key):
            raise ObjectChanged(f"{ref.bucket}/{ref.key}: etag {ref.etag} is not the simulated content")
        return rec.read(offset, length)
