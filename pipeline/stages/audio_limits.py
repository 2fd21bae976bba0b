"""What a recording may claim, and what the worker may read and decode for one routed call. Pure.

Channels and sample rate are bounded for every container (the router's probe and the worker's
decode apply the same :func:`implausible_header`): a header outside them is lying or hostile,
and a reader that trusted it would allocate channels x frames buffers sized by the lie.

The router checked the header; the worker must not trust the object to still agree
with it (an upstream event without a version, a header that lies about what follows).
A recording takes at most 8 bytes per sample (64-bit float PCM; every codec we accept
is smaller), so the object may be at most frames x channels x 8 plus a margin, and the
decoder may produce at most the routed frames plus a margin. Anything beyond is a
dead letter for that call, never an allocation sized by the file.
"""

from __future__ import annotations

from pipeline.events import RoutedCall

MAX_BYTES_PER_SAMPLE = 8
MARGIN = 0.05  # 5 % (container overhead, rounding of the routed duration)
SLACK_BYTES = 1 << 20  # headers, metadata chunks, cover art
SLACK_S = 1.0

# What a call recording can be (8 kHz telephony to 384 kHz studio; up to 32 channels of a trunk).
MAX_CHANNELS = 32
MIN_RATE_HZ, MAX_RATE_HZ = 2000, 384_000


def implausible_header(container: str, channels: int, rate_hz: int) -> str | None:
    """Why a header's channels or rate are no call recording's, or None."""
    if not 1 <= channels <= MAX_CHANNELS:
        return f"{container} header claims {channels} channels (at most {MAX_CHANNELS})"
    if not MIN_RATE_HZ <= rate_hz <= MAX_RATE_HZ:
        return f"{container} header claims a {rate_hz} Hz sample rate ({MIN_RATE_HZ}-{MAX_RATE_HZ} Hz)"
    return None


def max_object_bytes(call: RoutedCall) -> int:
    return int(call.frames * call.channels * MAX_BYTES_PER_SAMPLE * (1 + MARGIN)) + SLACK_BYTES


def max_decoded_frames(call: RoutedCall) -> int:
    """Frames per channel the decoder may produce: the routed duration x rate, plus a margin."""
    return int(max(call.frames, call.duration_s * call.sample_rate_hz) * (1 + MARGIN) + SLACK_S * call.sample_rate_hz)


def decoded_mismatch(call: RoutedCall, frames: int, channels: int, rate_hz: int) -> str | None:
    """Why a decoder's view of the stream is not the call that was routed, or None."""
    problem = implausible_header(call.container, call.channels, call.sample_rate_hz)
    if problem:  # routed before the check, or a forged event: never a buffer sized by it
        return f"routed call: {problem}"
    if channels != call.channels or rate_hz != call.sample_rate_hz:
        return f"stream has {channels} channels at {rate_hz} Hz; routed as {call.channels} at {call.sample_rate_hz} Hz"
    if frames >= 2**62:
        return None  # length unknown to the header (streamed FLAC): the decode itself stops at the cap
    if not 0 <= frames <= max_decoded_frames(call):
        return f"stream claims {frames} frames; routed duration allows at most {max_decoded_frames(call)}"
    return None
