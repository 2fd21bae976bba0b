"""SIMULATED engine: sleeps for what a device would take on a batch and returns fixed transcripts.

For load tests of the distributed pipeline (``callqa worker --engine simulated:rtfx=450``); it
never loads a model. The time model follows the real engine's shape (:mod:`pipeline.asr.packing`):

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
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import BatchStats, CallTranscript, Segment

WINDOW_S = 30.0
REFERENCE_COMPUTED_PER_AUDIO_S = 2 * 0.45 / 0.87  # a stereo call: two channels, 45 % speech each, packed 0.87
MODEL_NAME = "simulated"
MODEL_VERSION = "simulated-1"


@dataclass(frozen=True)
class SimulatedEngineOptions:
    rtfx: float = 450.0
    time_scale: float = 1.0
    max_items: int = 64
    min_fill: float = 0.25
    speech_share: float = 0.45
    mono_speech_share: float = 0.9
    window_fill: float = 0.87

    @classmethod
    def parse(cls, spec: str) -> SimulatedEngineOptions:
        """``simulated:rtfx=450,scale=60,max_items=64`` (every key optional after ``simulated``)."""
        name, _, rest = spec.partition(":")
        if name != "simulated":
            raise ValueError(f"not a simulated engine spec: {spec!r}")
        names = {"rtfx": "rtfx", "scale": "time_scale", "max_items": "max_items", "min_fill": "min_fill"}
        values: dict[str, float | int] = {}
        for part in filter(None, rest.split(",")):
            key, _, value = part.partition("=")
            if key.strip() not in names:
                raise ValueError(f"unknown simulated engine option {key!r}; known: {sorted(names)}")
            field = names[key.strip()]
            values[field] = int(value) if field == "max_items" else float(value)
        opts = cls(**values)  # type: ignore[arg-type]
        if opts.rtfx <= 0 or opts.time_scale <= 0 or opts.max_items < 1 or not 0 < opts.min_fill <= 1:
            raise ValueError(f"simulated engine needs rtfx > 0, scale > 0, max_items >= 1, 0 < min_fill <= 1: {spec!r}")
        return opts


@dataclass(frozen=True)
class DeviceTime:
    windows: int
    model_batches: int
    speech_s: float
    computed_s: float  # padded window seconds, as the device computes them
    device_s: float  # what the device would take (before the time scale)


def windows_of(duration_s: float, channels: int, opts: SimulatedEngineOptions) -> tuple[int, float]:
    """Packed windows of one call and its speech seconds."""
    share = opts.speech_share if channels > 1 else opts.mono_speech_share
    speech = duration_s * share
    per_channel = math.ceil(speech / (WINDOW_S * opts.window_fill)) if speech > 0 else 0
    return per_channel * channels, speech * channels


def device_time(calls: Sequence[tuple[float, int]], opts: SimulatedEngineOptions) -> DeviceTime:
    """The device time of one batch of calls given as (duration s, channels)."""
    windows, speech = 0, 0.0
    for duration_s, channels in calls:
        w, s = windows_of(duration_s, channels, opts)
        windows, speech = windows + w, speech + s
    batches = math.ceil(windows / opts.max_items)
    floor_items = opts.max_items * opts.min_fill
    charged, left = 0.0, windows
    for _ in range(batches):
        items = min(opts.max_items, left)
        charged += max(items, floor_items)
        left -= items
    computed = windows * WINDOW_S
    device_s = charged * WINDOW_S / (opts.rtfx * REFERENCE_COMPUTED_PER_AUDIO_S)
    return DeviceTime(windows, batches, speech, computed, device_s)


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
