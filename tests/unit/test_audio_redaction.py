"""Audio redaction (issue 31 item 2): PII spans -> samples replaced on the speaker's channel only."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.stages.audio_redaction import (
    ChannelSpan,
    channels_for,
    redact_samples,
    sample_ranges,
)


def noise(channels: int, frames: int, dtype: type = np.int16) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(-20000, 20000, (channels, frames)).astype(dtype)


def untouched(a: np.ndarray, b: np.ndarray, ch: int, ranges: list[tuple[int, int]]) -> bool:
    keep = np.ones(a.shape[1], dtype=bool)
    for lo, hi in ranges:
        keep[lo:hi] = False
    return np.array_equal(a[ch, keep], b[ch, keep])


@pytest.mark.parametrize("rate", [8000, 16000])
def test_span_times_map_to_samples_at_the_source_rate(rate: int) -> None:
    assert sample_ranges([ChannelSpan(0, 2.0, 3.5)], rate, 10 * rate) == {0: [(int(1.92 * rate), int(3.58 * rate))]}
    assert sample_ranges([ChannelSpan(0, 2.0, 3.5)], rate, 10 * rate, guard_s=0.0) == {0: [(2 * rate, 7 * rate // 2)]}


def test_a_partly_covered_sample_is_cut() -> None:
    # 1.00005 s at 8 kHz is sample 8000.4: the range starts at 8000 and ends after 8000
    assert sample_ranges([ChannelSpan(0, 1.00005, 1.00005)], 8000, 16000, guard_s=0.0) == {0: [(8000, 8001)]}


def test_the_guard_is_clamped_to_the_recording_at_both_ends() -> None:
    rate, frames = 8000, 8000 * 4
    assert sample_ranges([ChannelSpan(0, 0.02, 0.5), ChannelSpan(0, 3.5, 3.99)], rate, frames) == {
        0: [(0, int(0.58 * rate)), (int(3.42 * rate), frames)]
    }
    samples = noise(1, frames)
    out = redact_samples(samples, rate, [ChannelSpan(0, 0.02, 0.5), ChannelSpan(0, 3.5, 3.99)])
    assert out.shape == samples.shape and not out[0, :4640].any() and not out[0, 27360:].any()


def test_overlapping_and_touching_spans_merge() -> None:
    spans = [ChannelSpan(1, 1.0, 2.0), ChannelSpan(1, 1.5, 2.5), ChannelSpan(1, 2.66, 3.0), ChannelSpan(1, 5.0, 6.0)]
    assert sample_ranges(spans, 8000, 80000) == {1: [(7360, 24640), (39360, 48640)]}


def test_the_rest_is_bit_identical_and_the_spans_are_zero() -> None:
    rate = 16000
    samples = noise(1, rate * 10)
    spans = [ChannelSpan(0, 1.0, 2.0), ChannelSpan(0, 6.25, 7.0)]
    out = redact_samples(samples, rate, spans)
    ranges = sample_ranges(spans, rate, samples.shape[1])[0]
    assert untouched(samples, out, 0, ranges)
    assert all(not out[0, lo:hi].any() for lo, hi in ranges)
    assert samples[0, ranges[0][0] : ranges[0][1]].any()  # the input is not changed in place


def test_stereo_only_the_speakers_channel_changes() -> None:
    samples = noise(2, 8000 * 6)
    out = redact_samples(samples, 8000, [ChannelSpan(1, 2.0, 3.0)])
    assert np.array_equal(out[0], samples[0])
    assert untouched(samples, out, 1, [(15360, 24640)]) and not out[1, 15360:24640].any()


def test_a_tone_at_minus_20_dbfs_replaces_the_span() -> None:
    rate = 8000
    for dtype, full in ((np.int16, 32767), (np.int32, 2**31 - 1), (np.float32, 1.0)):
        samples = noise(1, rate * 3, dtype) if dtype is not np.float32 else np.full((1, rate * 3), 0.5, dtype)
        out = redact_samples(samples, rate, [ChannelSpan(0, 1.0, 2.0)], mode="tone", guard_s=0.0)
        tone = out[0, rate : 2 * rate].astype(np.float64) / full
        assert out.dtype == dtype and abs(np.abs(tone).max() - 0.1) < 1e-3
        spectrum = np.abs(np.fft.rfft(tone))
        assert np.argmax(spectrum) * rate / len(tone) == 1000.0
        assert np.array_equal(out[0, :rate], samples[0, :rate]) and np.array_equal(
            out[0, 2 * rate :], samples[0, 2 * rate :]
        )


def test_the_channel_of_a_role() -> None:
    assert channels_for("customer", {0: "agent", 1: "customer"}, 2) == [1]
    assert channels_for("customer", {0: "mixed"}, 1) == [0]  # a mono call: its one channel
    assert channels_for("customer", {0: "agent", 1: "agent"}, 2) == [0, 1]  # no such role: every channel
