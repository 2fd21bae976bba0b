"""Whole calls: 8 kHz stereo roles, order and times; silence; audio decoding errors."""

from __future__ import annotations

import io

import jiwer
import numpy as np
import pytest
import soundfile as sf

from pipeline.asr import AudioDecodeError, CallAudio, load_call_audio
from pipeline.asr.text import normalize_en
from pipeline.errors import CallQAError, DecodeError
from tests.unit.asr.speech import speak

RATE = 8_000
# (channel, start_s, text): agent on the left channel, customer on the right
TURNS = (
    (0, 1.0, "Good morning, thank you for calling the support line."),
    (1, 5.5, "Hello, my internet connection stopped working."),
    (0, 10.0, "I am sorry to hear that, I will reset your modem now."),
    (1, 14.5, "Thank you very much."),
)


def stereo_call_wav() -> tuple[bytes, list[tuple[int, float, float]]]:
    """An 8 kHz stereo WAV of TURNS, plus each turn's (channel, start_s, end_s) of voiced audio."""
    audio = np.zeros((2, int(19 * RATE)), np.float32)
    spans = []
    for channel, start_s, text in TURNS:
        speech = speak(text, RATE)
        voiced = np.flatnonzero(np.abs(speech) > 0.01)
        begin = int(start_s * RATE)
        audio[channel, begin : begin + speech.size] = speech
        spans.append((channel, (begin + voiced[0]) / RATE, (begin + voiced[-1]) / RATE))
    buf = io.BytesIO()
    sf.write(buf, audio.T, RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue(), spans


def test_stereo_8k_call_roles_order_and_times(engine):
    data, spans = stereo_call_wav()
    call = load_call_audio(data, roles={0: "agent", 1: "customer"}, call_id="call-1")
    assert call.roles == ("agent", "customer") and call.sample_rate == RATE
    result = engine.transcribe_batch([call])[0]
    assert result.call_id == "call-1" and result.model_name == "whisper-base"
    assert [s.role for s in result.segments] == ["agent", "customer", "agent", "customer"]
    for segment, (channel, start_s, end_s) in zip(result.segments, spans):
        assert segment.channel == channel
        assert abs(segment.start_s - start_s) <= 0.5 and abs(segment.end_s - end_s) <= 0.5
    # telephone band (8 kHz) synthetic speech costs Whisper base some accuracy: a looser bound
    for segment, (_, _, text) in zip(result.segments, TURNS):
        assert jiwer.wer(normalize_en(text), normalize_en(segment.text)) <= 0.35, segment.text
    assert result.languages == {0: "en", 1: "en"}
    assert result.duration_s == pytest.approx(19.0)
    assert {"vad_s", "asr_s"} <= set(result.timings)


def test_silence_yields_empty_transcript(engine):
    rng = np.random.default_rng(0)
    hiss = (rng.standard_normal((2, 10 * 16_000)) * 0.002).astype(np.float32)
    silent = CallAudio("quiet", np.zeros((1, 10 * 16_000), np.float32), 16_000, ("mixed",))
    noisy = CallAudio("hiss", hiss, 16_000, ("agent", "customer"))
    for result in engine.transcribe_batch([silent, noisy]):
        assert result.segments == [] and result.languages == {}


def test_one_silent_channel_gives_only_the_other_role(engine):
    speech = speak("Please confirm your date of birth.", 16_000)
    samples = np.zeros((2, speech.size + 32_000), np.float32)
    samples[1, 16_000 : 16_000 + speech.size] = speech
    result = engine.transcribe(CallAudio("one-sided", samples, 16_000, ("agent", "customer")))
    assert [s.role for s in result.segments] == ["customer"]
    assert "birth" in result.segments[0].text.lower()


def test_mono_file_is_one_mixed_speaker(tmp_path):
    path = tmp_path / "mono.flac"
    sf.write(path, np.zeros(8_000, np.float32), 8_000)
    call = load_call_audio(path, roles={0: "agent", 1: "customer"})
    assert call.roles == ("mixed",) and call.samples.shape == (1, 8_000) and call.call_id == "mono"


@pytest.mark.parametrize("payload", [b"", b"RIFF\x00\x00\x00\x00WAVEjunk", b"not audio at all" * 100])
def test_corrupt_audio_raises_typed_decode_error(payload):
    with pytest.raises(AudioDecodeError) as info:
        load_call_audio(payload)
    assert isinstance(info.value, DecodeError) and isinstance(info.value, CallQAError)
