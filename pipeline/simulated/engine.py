"""SIMULATED engine: sleeps for what a device would take on a batch and returns fixed transcripts.

For load tests of the distributed pipeline (``callqa worker --engine simulated:rtfx=450``); it
never loads a model. The time model (:mod:`pipeline.simulated.device_model`, which ``callqa plan``
sizes workers by too) follows the real engine's shape (:mod:`pipeline.asr.packing`):

- each channel's speech (``speech_share`` of a stereo channel, ``mono_speech_share`` of a mono
  one) is packed into 30 s windows filled to ``window_fill`` (0.87, the measured packing);
- the windows of a batch run in model batches of at most ``max_items`` windows; a model batch
  costs its padded window seconds, and one filled less than ``min_fill`` costs as if it were
  filled that far (a device underused by a small batch is not proportionally faster);
- the device computes padded window seconds at ``rtfx x REFERENCE_COMPUTED_PER_AUDIO_S``, so a
  full batch of reference stereo calls runs at ``rtfx`` audio seconds per second, as measured by
  ``tools/bench_engine.py``;
- the sleep is that device time divided by ``time_scale`` (a night compressed into minutes).

The transcripts are well formed and carry planted QA events, chosen by the call id so that
reruns agree: the agent's greeting and recording notice (missing on every 7th call), a card
number spoken by every 4th customer, a guaranteed-returns promise on every 10th call.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence

from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import BatchStats, CallTranscript, Segment
from pipeline.simulated.device_model import (  # noqa: F401 - re-exported: the engine's options and cost
    REFERENCE_COMPUTED_PER_AUDIO_S,
    WINDOW_S,
    DeviceTime,
    SimulatedEngineOptions,
    device_time,
    windows_of,
)

MODEL_NAME = "simulated"
MODEL_VERSION = "simulated-1"


def _pick(call_id: str, every: int) -> bool:
    return int(hashlib.sha1(call_id.encode()).hexdigest()[:8], 16) % every == 0  # noqa: S324 - a stable choice


def planted_segments(call_id: str, duration_s: float, roles: Sequence[str]) -> list[Segment]:
    """Fixed lines with the QA events this call carries, on the call's clock and within its length."""
    agent = next((i for i, r in enumerate(roles) if r == "agent"), 0)
    customer = next((i for i, r in enumerate(roles) if r == "customer"), agent)
    lines: list[tuple[int, str]] = []
    greeting = "hello my name is anna from the bank"
    if not _pick(call_id, 7):
        greeting += " this call is recorded for quality purposes"
    lines.append((agent, greeting))
    lines.append((customer, "hi i would like to ask about my account"))
    if _pick(call_id, 10):
        lines.append((agent, "this fund has guaranteed returns with no risk at all"))
    if _pick(call_id, 4):
        lines.append((customer, "my card number is 4111 1111 1111 1111"))
    lines.append((agent, "thank you for calling goodbye"))
    step = max(duration_s, 0.1) / len(lines)
    segments = []
    for i, (channel, text) in enumerate(lines):
        start = i * step
        segments.append(Segment(roles[channel], channel, round(start, 3), round(start + step * 0.8, 3), text, "en"))
    return segments


class SimulatedEngine:
    """A :class:`pipeline.stages.asr.SpeechEngine` that sleeps for the modelled device time."""

    model_version = MODEL_VERSION

    def __init__(self, opts: SimulatedEngineOptions, sleep: object = None) -> None:
        self.opts = opts
        self._sleep = sleep or time.sleep
        self._local = threading.local()

    @property
    def model_batch_windows(self) -> int:
        return self.opts.max_items

    @property
    def last_batch_stats(self) -> Sequence[BatchStats]:
        return getattr(self._local, "stats", [])

    def transcribe(self, call: CallAudio, /) -> CallTranscript:
        return self.transcribe_batch([call])[0]

    def transcribe_batch(self, calls: Sequence[CallAudio], /) -> list[CallTranscript]:
        shapes = [(c.samples.shape[1] / c.sample_rate, c.samples.shape[0]) for c in calls]
        cost = device_time(shapes, self.opts)
        self._sleep(cost.device_s / self.opts.time_scale)  # type: ignore[operator]
        self._local.stats = [
            BatchStats(
                items=cost.windows,
                bucket_s=WINDOW_S,
                audio_s=cost.windows * WINDOW_S * self.opts.window_fill,
                speech_s=cost.speech_s,
                computed_s=cost.computed_s,
                encode_s=cost.device_s,
            )
        ]
        share = cost.device_s / max(1, len(calls))
        return [
            CallTranscript(
                call_id=c.call_id,
                segments=planted_segments(c.call_id, duration_s, c.roles),
                languages={ch: "en" for ch in range(channels)},
                model_name=MODEL_NAME,
                model_version=MODEL_VERSION,
                timings={"asr_s": round(share, 6), "simulated_device_s": round(share, 6)},
                duration_s=duration_s,
                language_probs={ch: 1.0 for ch in range(channels)},
            )
            for c, (duration_s, channels) in zip(calls, shapes, strict=True)
        ]
