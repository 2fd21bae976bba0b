"""How many 30 s model windows a call will fill, estimated from what the router probed.

The engine packs each channel's speech into 30 s windows (:mod:`pipeline.asr.packing`) and runs
them in model batches of a fixed number of windows (16 on CPU, 64 on an accelerator:
:mod:`pipeline.asr.presets`). A worker's micro-batch counted in audio seconds alone ends where its
budget ends, not where a model batch does: 1,800 s of stereo calls fill about 70 windows, a full
batch of 64 and a second of 6, which on an accelerator costs nearly a whole batch's decode steps.
Counted in windows as well, a micro-batch holds a whole number of model batches.

The estimate knows only a call's duration and channels (its audio is not read yet), so it assumes
the shares of speech measured on call audio: each stereo channel is one party, speaking about
45 % of the call; a mono mix carries both, about 90 %; packing fills windows to 0.87. A call's
windows are rounded up per channel, as the packer starts a channel's speech in a window of its own.
The simulated engine's device model (:mod:`pipeline.simulated.device_model`) uses the same estimate.

Pure: stdlib only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_S = 30.0


@dataclass(frozen=True)
class SpeechShares:
    stereo: float = 0.45  # of each channel of a two-party stereo call
    mono: float = 0.9  # of a mono mix of both parties
    window_fill: float = 0.87  # packed speech per window second

    def of(self, channels: int) -> float:
        return self.stereo if channels > 1 else self.mono


SHARES = SpeechShares()


def speech_s(duration_s: float, channels: int, shares: SpeechShares = SHARES) -> float:
    """All channels' speech seconds."""
    return max(0.0, duration_s) * shares.of(channels) * max(1, channels)


def estimated_windows(duration_s: float, channels: int, shares: SpeechShares = SHARES) -> int:
    per_channel_speech = max(0.0, duration_s) * shares.of(channels)
    per_channel = math.ceil(per_channel_speech / (WINDOW_S * shares.window_fill)) if per_channel_speech > 0 else 0
    return per_channel * max(1, channels)


def micro_batch_windows(model_batch: int, max_audio_s: float, shares: SpeechShares = SHARES) -> int:
    """The windows a micro-batch may hold: the most whole model batches that ``max_audio_s`` of
    stereo calls would fill, at least one (a budget smaller than a model batch still takes one)."""
    if model_batch < 1:
        raise ValueError(f"a model batch holds at least one window, not {model_batch}")
    held = max_audio_s * shares.stereo * 2 / (WINDOW_S * shares.window_fill)
    return model_batch * max(1, math.floor(held / model_batch))
