"""Fetch and decode the audio of routed calls, concurrently.

The :class:`pipeline.stages.asr.AudioFetcher` of the Kafka worker (objects in MinIO)
and of the embedded runner (local files). Every call comes back either ready for the
engine or dead with its reason. Retries are the store's (:class:`pipeline.stages.retry.RetryingStore`,
the one retry layer); a :class:`pipeline.stages.retry.RetryInterrupted` (the worker is
stopping) propagates, so the batch gets no outcome and is read again.
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import soundfile

from pipeline.asr.audio import load_call_audio
from pipeline.asr.errors import AudioDecodeError
from pipeline.events import RoutedCall
from pipeline.stages.asr import AsrInput, Fetched
from pipeline.stages.audio_limits import decoded_mismatch, max_object_bytes
from pipeline.stages.outcomes import Dead, Tag
from pipeline.stages.storage import MissingObject, ObjectStore, StorageError
from pipeline.stages.transcript_event import audio_for, roles_by_channel


class Fetcher:
    def __init__(self, store: ObjectStore, threads: int = 4) -> None:
        self.store = store
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fetch")

    def fetch(self, inputs: Sequence[AsrInput[Tag]]) -> list[Fetched[Tag] | Dead[Tag]]:
        """Every input must carry its decoded call. Order is kept; one call is fetched in this thread."""
        if len(inputs) < 2:
            return [self.fetch_one(i) for i in inputs]
        return list(self.pool.map(self.fetch_one, inputs))

    def fetch_one(self, item: AsrInput[Tag]) -> Fetched[Tag] | Dead[Tag]:
        call = item.call
        if call is None:
            return item.dead("malformed_event", item.error or "undecodable")
        started = time.perf_counter()
        cap = max_object_bytes(call)
        if (call.object.size_bytes or 0) > cap:
            return item.dead(
                "corrupt_header", f"object is {call.object.size_bytes} bytes; its routed header allows at most {cap}"
            )
        try:
            data = self.store.read(call.object, 0, cap + 1)  # never more than the header allows
        except MissingObject as exc:
            return item.dead("missing_object", str(exc))
        except StorageError as exc:  # permanent, or transient past the retry deadline
            return item.dead("fetch_failed", str(exc))
        if len(data) > cap:
            return item.dead("corrupt_header", f"object is over {cap} bytes, more than its routed header allows")
        try:
            problem = _stream_mismatch(call, data)
            if problem:
                return item.dead("corrupt_header", problem)
            audio = load_call_audio(data, roles_by_channel(call), call_id=call.call_id)
        except AudioDecodeError as exc:
            return item.dead("decode_failed", str(exc))
        except (MemoryError, Exception) as exc:  # noqa: BLE001 - a decoder failure costs this call only
            return item.dead("decode_failed", f"{type(exc).__name__}: {exc}")
        return Fetched(item, call, audio_for(call, audio), time.perf_counter() - started)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _stream_mismatch(call: RoutedCall, data: bytes) -> str | None:
    """Check the decoder's own header view before it allocates anything sized by it."""
    try:
        info = soundfile.info(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioDecodeError(f"cannot decode audio {call.call_id}: {exc}") from exc
    return decoded_mismatch(call, info.frames, info.channels, info.samplerate)
