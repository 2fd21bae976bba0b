"""The device-time model of a batch of calls (pure: stdlib only), one model for three readers.

The simulated engine sleeps it (:mod:`pipeline.simulated.engine`), ``tools/simulate_night.py``
takes its ideal makespan from it, and ``callqa plan`` (:mod:`pipeline.ops.plan`) sizes workers by
it, so the plan pays the same batching costs the engine does: each channel's speech packed into
30 s windows (a call's last window is rounded up whole), model batches of at most ``max_items``
windows, and a batch filled less than ``min_fill`` charged as if filled that far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.stages.window_estimate import WINDOW_S, SpeechShares, estimated_windows, speech_s

REFERENCE_COMPUTED_PER_AUDIO_S = 2 * 0.45 / 0.87  # a stereo call: two channels, 45 % speech each, packed 0.87


@dataclass(frozen=True)
class SimulatedEngineOptions:
    rtfx: float = 450.0
    time_scale: float = 1.0
    max_items: int = 64
    min_fill: float = 0.25
    speech_share: float = 0.45
    mono_speech_share: float = 0.9
    window_fill: float = 0.87

    @property
    def shares(self) -> SpeechShares:
        return SpeechShares(self.speech_share, self.mono_speech_share, self.window_fill)

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
    """Packed windows of one call and its speech seconds (the workers' estimate: the simulated
    engine's calls speak exactly the shares the estimate assumes)."""
    return estimated_windows(duration_s, channels, opts.shares), speech_s(duration_s, channels, opts.shares)


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


def batching_factor(calls: Sequence[tuple[float, int]], opts: SimulatedEngineOptions) -> float:
    """Device seconds of ``calls`` in full batches over audio ÷ RTFx (1.0: no batching cost).

    What a bucket's calls cost beyond their audio at the benchmark's RTFx: each call's windows are
    rounded up whole (a 100 s stereo call fills 3.2 windows a channel and computes 4), and a bucket
    with fewer windows than a batch pays the fill floor.
    """
    audio_s = sum(duration_s for duration_s, _ in calls)
    if audio_s <= 0:
        return 1.0
    return device_time(calls, opts).device_s / (audio_s / opts.rtfx)


def spread_calls(low_s: float, high_s: float, count: int = 64, channels: int = 2) -> list[tuple[float, int]]:
    """``count`` calls at lengths spread evenly over (low_s, high_s]: a bucket's calls when only its
    audio hours are known (``callqa plan`` without a night's call list)."""
    step = (high_s - low_s) / count
    return [(low_s + step * (i + 0.5), channels) for i in range(count)]
