"""Faint speech: a quiet party under a line's stationary noise is reported, not decoded (pipeline/asr/vad.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.asr.vad import VAD_RATE, ChannelSpeech, SileroVad, VadOptions, noise_margin_db
from tests.unit.asr.speech import EN_SENTENCES, speak

S = VAD_RATE


def at_dbfs(x: np.ndarray, dbfs: float) -> np.ndarray:
    return (x * 10 ** (dbfs / 20) / np.sqrt(np.mean(x**2))).astype(np.float32)


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad(VadOptions())


def call(noise_dbfs: float | None) -> tuple[np.ndarray, tuple[float, float]]:
    """A loud turn at -20 dBFS, a quiet party's turn 23 dB under it, another loud turn; white line
    noise at ``noise_dbfs`` (-37: 17 dB under the loud party, so 6 dB over the quiet one)."""
    loud, quiet, again = (speak(text, S) for text in EN_SENTENCES[:3])
    gap = np.zeros(S, np.float32)
    parts = [gap, at_dbfs(loud, -20), gap, at_dbfs(quiet, -43), gap, at_dbfs(again, -20), gap]
    audio = np.concatenate(parts)
    start = sum(p.size for p in parts[:3]) / S
    if noise_dbfs is not None:
        audio = audio + at_dbfs(np.random.default_rng(5).standard_normal(audio.size), noise_dbfs)
    return audio.astype(np.float32), (start, start + quiet.size / S)


def test_a_quiet_party_under_the_lines_noise_is_faint_speech(vad: SileroVad) -> None:
    audio, (start, end) = call(noise_dbfs=-37)
    speech = vad.speech(audio)
    assert speech.faint, "the quiet turn is heard once the noise is taken out"
    in_turn = sum(min(b / S, end) - max(a / S, start) for a, b in speech.faint if a / S < end and b / S > start)
    assert in_turn >= 0.5 * (end - start)
    assert all(b <= r0 or a >= r1 for a, b in speech.faint for r0, r1 in speech.regions)  # never decoded as well
    assert vad.regions(audio) == speech.regions


def test_without_noise_or_with_faint_speech_off_nothing_is_faint(vad: SileroVad) -> None:
    clean, _ = call(noise_dbfs=None)
    assert noise_margin_db(clean) == float("inf") and vad.speech(clean).faint == []
    noisy, _ = call(noise_dbfs=-37)
    assert SileroVad(VadOptions(faint_speech=False)).speech(noisy).faint == []


def test_every_channel_of_every_call_read_together_reads_as_each_alone(vad: SileroVad) -> None:
    noisy, _ = call(noise_dbfs=-37)
    clean, _ = call(noise_dbfs=None)
    calls = [noisy[None], np.stack([clean, noisy]), np.zeros((1, 100), np.float32)]
    together = vad.calls_speech(calls)
    assert together == [[vad.speech(noisy)], [vad.speech(clean), vad.speech(noisy)], [ChannelSpeech([])]]
    assert together[1][1].faint and not together[1][0].faint


def test_hiss_or_hum_alone_is_no_faint_speech(vad: SileroVad) -> None:
    t = np.arange(30 * S) / S
    hiss = at_dbfs(np.random.default_rng(0).standard_normal(t.size), -40)
    hum = at_dbfs(np.sin(2 * np.pi * 60 * t) + 0.3 * np.sin(2 * np.pi * 180 * t), -40) + 0.05 * hiss
    assert [vad.speech(x).faint for x in (hiss, hum)] == [[], []]


def test_the_transcript_says_where_faint_speech_went_untranscribed(engine) -> None:
    from pipeline.asr import CallAudio

    audio, (start, end) = call(noise_dbfs=-37)
    result = engine.transcribe(CallAudio("faint", audio[None, :], S, ("mixed",)))
    faint = [u for u in result.untranscribed if u.why == "faint"]
    assert faint and any(u.start_s < end and u.end_s > start for u in faint)
    assert not [s for s in result.segments for u in faint if s.start_s < u.end_s - 0.3 and s.end_s > u.start_s + 0.3]


def test_the_cleaned_copy_keeps_a_voice_and_lowers_the_stationary_noise() -> None:
    from pipeline.asr.vad import without_stationary_noise

    t = np.arange(70 * S) / S
    noise = at_dbfs(np.random.default_rng(3).standard_normal(t.size), -40)
    voice = np.where((t > 10) & (t < 12), at_dbfs(np.sin(2 * np.pi * 440 * t), -20), 0).astype(np.float32)
    cleaned = without_stationary_noise(voice + noise)  # over two noise blocks (60 s each)
    rms = lambda x: 20 * np.log10(np.sqrt(np.mean(x.astype(np.float64) ** 2)))  # noqa: E731
    assert abs(rms(cleaned[10 * S + 800 : 12 * S - 800]) - rms((voice + noise)[10 * S + 800 : 12 * S - 800])) < 1
    assert rms(cleaned[20 * S : 60 * S]) < rms(noise[20 * S : 60 * S]) - 4
    assert rms(cleaned[62 * S : 69 * S]) < rms(noise[62 * S : 69 * S]) - 4
