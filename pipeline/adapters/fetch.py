"""Fetch and decode the audio of routed calls, concurrently, with bounded retries.

Shared by the Kafka worker (objects in MinIO) and the embedded runner (local files).
Every call comes back either ready for the engine or as a DeadLetter with its reason.
"""

from __future__ import annotations

import io
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import soundfile

from pipeline.asr import AudioDecodeError, CallAudio, load_call_audio
from pipeline.events import DeadLetter, RoutedCall, SourcePosition
from pipeline.adapters.storage import MissingObject, ObjectStore, StorageError
from pipeline.stages.audio_limits import decoded_mismatch, max_object_bytes
from pipeline.stages.transcript_event import audio_for, roles_by_channel

Tag = TypeVar("Tag")  # whatever the caller needs back with each call (a Kafka message, a path)


@dataclass(frozen=True)
class Ready(Generic[Tag]):
    tag: Tag
    call: RoutedCall
    audio: CallAudio
    fetch_s: float


@dataclass(frozen=True)
class Failed(Generic[Tag]):
    tag: Tag
    letter: DeadLetter


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3
    backoff_s: float = 0.5


class Fetcher:
    def __init__(self, store: ObjectStore, threads: int = 4, retry: RetryPolicy = RetryPolicy()) -> None:
        self.store = store
        self.retry = retry
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fetch")

    def fetch_all(self, items: list[tuple[Tag, RoutedCall, bytes, SourcePosition | None]]) -> list[Ready | Failed]:
        """items: (tag, call, original payload, source position). Order is kept."""
        return list(self.pool.map(lambda item: self.fetch_one(*item), items))

    def fetch_one(self, tag: Tag, call: RoutedCall, payload: bytes,
                  source: SourcePosition | None) -> Ready | Failed:
        def failed(reason: str, message: str, attempts: int = 1) -> Failed:
            return Failed(tag, DeadLetter.of(payload=payload, key=call.call_id.encode(), reason=reason,
                                             message=message, stage="asr", source=source, attempts=attempts))

        started = time.perf_counter()
        cap = max_object_bytes(call)
        if (call.object.size_bytes or 0) > cap:
            return failed("corrupt_header", f"object is {call.object.size_bytes} bytes; its routed header "
                                            f"allows at most {cap}")
        for attempt in range(1, self.retry.attempts + 1):
            try:
                data = self.store.read(call.object, 0, cap + 1)  # never more than the header allows
                break
            except MissingObject as exc:
                return failed("missing_object", str(exc), attempt)
            except StorageError as exc:
                if attempt == self.retry.attempts:
                    return failed("fetch_failed", f"{exc} (after {attempt} attempts)", attempt)
                time.sleep(self.retry.backoff_s * 2 ** (attempt - 1))
        if len(data) > cap:
            return failed("corrupt_header", f"object is over {cap} bytes, more than its routed header allows")
        try:
            problem = _stream_mismatch(call, data)
            if problem:
                return failed("corrupt_header", problem)
            audio = load_call_audio(data, roles_by_channel(call), call_id=call.call_id)
        except AudioDecodeError as exc:
            return failed("decode_failed", str(exc))
        except (MemoryError, Exception) as exc:  # noqa: BLE001 - a decoder failure costs this call only
            return failed("decode_failed", f"{type(exc).__name__}: {exc}")
        return Ready(tag, call, audio_for(call, audio), time.perf_counter() - started)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _stream_mismatch(call: RoutedCall, data: bytes) -> str | None:
    """Check the decoder's own header view before it allocates anything sized by it."""
    try:
        info = soundfile.info(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioDecodeError(f"cannot decode audio {call.call_id}: {exc}") from exc
    return decoded_mismatch(call, info.frames, info.channels, info.samplerate)
