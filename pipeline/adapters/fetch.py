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

import numpy as np
import soundfile

from pipeline.asr.audio import CallAudio, channels_of
from pipeline.asr.errors import AudioDecodeError
from pipeline.events import RoutedCall
from pipeline.stages.asr import AsrInput, Fetched
from pipeline.stages.audio_limits import decoded_mismatch, implausible_header, max_decoded_frames, max_object_bytes
from pipeline.stages.outcomes import Dead, Tag
from pipeline.stages.probe import HEAD_BYTES, RAW_SUBTYPES, AudioInfo, decoder_error, wav_data_offset
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectStore, StorageError, storage_call
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
            return item.undecodable()
        started = time.perf_counter()
        problem = implausible_header(call.container, call.channels, call.sample_rate_hz)
        if problem:  # routed before the router checked every container, or forged: not even read
            return item.dead("corrupt_header", f"routed call: {problem}")
        cap = max_object_bytes(call)
        if (call.object.size_bytes or 0) > cap:
            return item.dead(
                "corrupt_header", f"object is {call.object.size_bytes} bytes; its routed header allows at most {cap}"
            )
        try:
            data = storage_call(self.store.read, call.object, 0, cap + 1)  # never more than the header allows
        except MissingObject as exc:
            return item.dead("missing_object", str(exc))
        except ObjectChanged as exc:  # the read is conditional on the routed etag
            return item.dead("object_changed", f"{exc}; its new content is routed by its own arrival")
        except StorageError as exc:  # permanent, or transient past the retry deadline
            return item.dead("fetch_failed", str(exc))
        if len(data) > cap:
            return item.dead("corrupt_header", f"object is over {cap} bytes, more than its routed header allows")
        try:
            audio = decode_bounded(call, data)
        except StreamMismatch as exc:
            return item.dead("corrupt_header", str(exc))
        except AudioDecodeError as exc:
            return item.dead("decode_failed", str(exc))
        except (MemoryError, Exception) as exc:  # noqa: BLE001 - a decoder failure costs this call only
            return item.dead("decode_failed", f"{type(exc).__name__}: {exc}")
        return Fetched(item, call, audio_for(call, audio), time.perf_counter() - started)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class StreamMismatch(Exception):
    """The decoder's view of the stream is not the call that was routed."""


def decode_bounded(call: RoutedCall, data: bytes) -> CallAudio:
    """Decode into one buffer sized by the routed header, never by the stream.

    The decoder's own header view is checked first; a stream whose header gives no length
    (a streamed FLAC) is read into a buffer of at most the routed frames plus a margin, and
    one frame more than that means the object is not the call that was routed. So no
    object, whatever its header says, makes the worker allocate more than its routed call.
    """
    try:
        with open_recording(call, data) as f:
            problem = decoded_mismatch(call, f.frames, f.channels, f.samplerate)
            if problem:
                raise StreamMismatch(problem)
            cap = max_decoded_frames(call)
            buf = np.empty((min(f.frames, cap) + 1, f.channels), dtype=np.float32)
            decoded = f.read(out=buf)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioDecodeError(f"cannot decode audio {call.call_id}: {decoder_error(exc)}") from exc
    if len(decoded) > cap:
        raise StreamMismatch(f"stream decodes to more than {cap} frames; the routed duration allows at most that")
    if len(decoded) == 0:
        raise AudioDecodeError(f"audio {call.call_id} has no samples")
    samples, roles = channels_of(decoded, roles_by_channel(call))
    return CallAudio(call.call_id, samples, int(call.sample_rate_hz), roles)


def open_recording(call: RoutedCall, data: bytes) -> soundfile.SoundFile:
    """The decoder over the object, as the router probed it (see :func:`open_probed`)."""
    return open_probed(data, AudioInfo(call.container, call.codec, call.sample_rate_hz, call.channels, call.frames))


def open_probed(data: bytes, info: AudioInfo) -> soundfile.SoundFile:
    """The decoder over the object. A recorder that stopped before writing its sizes leaves a
    WAV data chunk of size 0, which libsndfile reads as no frames; the probe took the length
    from the object size (as for a streaming writer), so the samples are read as raw PCM."""
    f = soundfile.SoundFile(io.BytesIO(data))
    if f.frames or info.container != "WAV" or not info.frames:
        return f
    offset, subtype = wav_data_offset(data[:HEAD_BYTES]), RAW_SUBTYPES.get(info.codec)
    if offset is None or subtype is None:
        return f
    f.close()
    return soundfile.SoundFile(
        io.BytesIO(data[offset:]),
        format="RAW",
        subtype=subtype,
        endian="LITTLE",
        channels=info.channels,
        samplerate=info.sample_rate_hz,
    )
