"""Whole calls: 8 kHz stereo roles, order and times; silence; audio decoding errors."""

from __future__ import annotations

import io
import subprocess
from collections import Counter

import jiwer
import numpy as np
import pytest
import soundfile as sf
import soxr

from pipeline.asr import AudioDecodeError, CallAudio, load_call_audio
from pipeline.asr.text import normalize_en, normalize_zh
from pipeline.errors import CallQAError, DecodeError
from tests.unit.asr.speech import speak

RATE = 8_000
DIGIT_WORDS = {"zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
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
    # telephone band (8 kHz) synthetic speech costs Whisper base some accuracy: looser bounds
    refs = [normalize_en(text) for _, _, text in TURNS]
    hyps = [normalize_en(segment.text) for segment in result.segments]
    assert jiwer.wer(refs, hyps) <= 0.25, hyps
    assert all(jiwer.wer(ref, hyp) <= 0.5 for ref, hyp in zip(refs, hyps)), hyps
    assert result.languages == {0: "en", 1: "en"}
    assert result.duration_s == pytest.approx(19.0)
    assert {"vad_s", "asr_s"} <= set(result.timings)


def test_a_window_judged_no_speech_is_judged_again_turn_by_turn():
    """A packed window the no-speech rule drops took every turn in it along (a quiet party 15 dB
    down on a noisy line lost six turns so): its VAD pieces are decoded alone, and only those
    still judged no-speech are dropped, each counted."""
    from pipeline.asr import Engine
    from pipeline.asr.presets import for_tests

    # thresholds that judge every window no-speech, so each drop is seen and counted
    harsh = Engine.load(for_tests(no_speech_threshold=-1.0, logprob_threshold=1e9))
    data, spans = stereo_call_wav()  # each channel: one window of two turns
    result = harsh.transcribe_batch([load_call_audio(data, roles={0: "agent", 1: "customer"}, call_id="c")])[0]
    assert result.segments == []
    assert harsh.stats.redecoded_windows == len(spans)  # every turn judged on its own
    assert harsh.stats.no_speech_windows == len(spans)  # and counted, one by one
    # and said in the transcript: each turn's stretch, on its channel, as no_speech
    heard = sorted((u.channel, u.start_s, u.end_s) for u in result.untranscribed)
    assert {u.why for u in result.untranscribed} == {"no_speech"} and len(heard) == len(spans)
    for (channel, start, end), (ch, a, b) in zip(heard, sorted(spans), strict=True):
        assert channel == ch and start <= a + 0.1 and end >= b - 0.1, (heard, spans)


def test_the_rest_of_a_window_cut_mid_turn_is_not_dropped_by_the_no_speech_rule():
    """The rest of a window after its decode looped starts mid-turn, where the no-speech figure
    reads high (a quiet agent's last 7 s, "on the next 50 months. Your plan costs ...", read 0.80
    and were dropped whole): its window was heard as speech, so it is transcribed; any other
    window is still judged by the rule."""
    from collections import defaultdict

    from pipeline.asr import Engine
    from pipeline.asr.engine import _Window
    from pipeline.asr.packing import pack_regions
    from pipeline.asr.presets import for_tests

    harsh = Engine.load(for_tests(no_speech_threshold=-1.0, logprob_threshold=1e9))  # every window: no speech
    speech = speak("I have noted the card ending, I will block it now.", 16_000)
    [packed] = pack_regions([(0, speech.size)], max_window_s=30)
    for mid_turn, kept in ((True, True), (False, False)):
        window = _Window(0, 0, packed, speech, mid_turn=mid_turn)
        [decoded] = harsh._decode([window], [defaultdict(float)])[id(window)]
        assert bool(decoded.spans) == kept and (decoded.dropped == ((0, "no_speech"),)) != kept
        if kept:
            assert "block" in " ".join(text for _, text in decoded.spans).lower()


def test_a_window_whose_decode_ran_ahead_of_its_audio_is_decoded_turn_by_turn(engine, monkeypatch):
    """A packed window whose decode went back to an earlier turn with audio still ahead wrote
    later turns' text on earlier turns' times (a slow voice on a GSM line: two turns lost, yet
    counted as covered): none of its spans is kept and each turn is decoded alone."""
    import dataclasses

    import pipeline.asr.engine as engine_module

    real = engine_module.coverage

    def ran_ahead(spans, window, *rest):  # every packed window's decode judged to have run ahead
        cover = real(spans, window, *rest)
        return dataclasses.replace(cover, rewound=True) if len(window.pieces) > 1 else cover

    monkeypatch.setattr(engine_module, "coverage", ran_ahead)
    data, spans = stereo_call_wav()  # each channel: one window of two turns
    before = engine.stats.rewound_windows
    result = engine.transcribe_batch([load_call_audio(data, roles={0: "agent", 1: "customer"}, call_id="c")])[0]
    assert engine.stats.rewound_windows - before == 2
    assert [s.role for s in result.segments] == ["agent", "customer", "agent", "customer"]  # once each
    for segment, (channel, start_s, end_s) in zip(result.segments, spans, strict=True):
        assert segment.channel == channel
        assert abs(segment.start_s - start_s) <= 0.5 and abs(segment.end_s - end_s) <= 0.5
    # each turn's words, read with less context than in a window of two (0.26 measured)
    refs = [normalize_en(text) for _, _, text in TURNS]
    assert jiwer.wer(refs, [normalize_en(segment.text) for segment in result.segments]) <= 0.35, result.segments


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
    assert "confirm" in result.segments[0].text.lower()  # "date of birth" itself reads "native ..." at some VAD pads


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


def dialogue(agent: list[np.ndarray], customer: list[np.ndarray], rate: int = 16_000) -> CallAudio:
    """A stereo call whose parties take turns (0.6 s apart): agent left, customer right."""
    turns = [(0, a) for a in agent] + [(1, c) for c in customer]
    turns = [turns[i // 2 + (len(agent) if i % 2 else 0)] for i in range(len(turns))]  # alternate parties
    total = sum(t.size for _, t in turns) + int(0.6 * rate) * (len(turns) + 1)
    samples = np.zeros((2, total), np.float32)
    at = int(0.6 * rate)
    for channel, speech in turns:
        samples[channel, at : at + speech.size] = speech
        at += speech.size + int(0.6 * rate)
    return CallAudio("dialogue", samples, rate, ("agent", "customer"))


@pytest.fixture(scope="module")
def per_turn_engine(engine):
    from dataclasses import replace

    from pipeline.asr import Engine

    return Engine(replace(engine.opts, pack_windows=False), engine.model, engine.tokenizer, engine.device,
                  engine.model_name, engine.model_version)


def test_packed_windows_are_at_least_as_accurate_as_one_per_turn(engine, per_turn_engine, en_clips, zh_clips):
    en = dialogue([c.samples for c in en_clips[:4]], [c.samples for c in en_clips[4:8]])
    zh = dialogue([c.samples for c in zh_clips[:6]], [c.samples for c in zh_clips[6:12]])
    refs_en = {0: " ".join(c.text for c in en_clips[:4]), 1: " ".join(c.text for c in en_clips[4:8])}
    refs_zh = {0: "".join(c.text for c in zh_clips[:6]), 1: "".join(c.text for c in zh_clips[6:12])}

    def error(result, refs, norm, metric):
        return metric([norm(refs[ch]) for ch in (0, 1)], [norm(result.text_of(role)) for role in ("agent", "customer")])

    packed_en, turn_en = (e.transcribe(en) for e in (engine, per_turn_engine))
    packed_zh, turn_zh = (e.transcribe(zh) for e in (engine, per_turn_engine))
    assert error(packed_en, refs_en, normalize_en, jiwer.wer) <= error(turn_en, refs_en, normalize_en, jiwer.wer) + 1e-9
    assert error(packed_zh, refs_zh, normalize_zh, jiwer.cer) <= error(turn_zh, refs_zh, normalize_zh, jiwer.cer) + 1e-9
    # and far fewer windows: one per channel instead of one per turn
    assert len(engine.last_batch_stats) >= 1
    windows = sum(b.items for b in engine.last_batch_stats)
    assert windows == 2


def test_a_call_in_two_languages_keeps_each_party_s_language(engine, en_clips, zh_clips):
    call = dialogue([c.samples for c in en_clips[:3]], [c.samples for c in zh_clips[:3]])
    result = engine.transcribe(call)
    assert result.languages == {0: "en", 1: "zh"}
    assert {s.language for s in result.segments if s.role == "agent"} == {"en"}
    assert {s.language for s in result.segments if s.role == "customer"} == {"zh"}
    assert jiwer.wer(normalize_en(" ".join(c.text for c in en_clips[:3])), normalize_en(result.text_of("agent"))) <= 0.15
    assert jiwer.cer(normalize_zh("".join(c.text for c in zh_clips[:3])), normalize_zh(result.text_of("customer"))) <= 0.2


def test_a_party_switching_language_between_windows_is_transcribed_in_both(engine, en_clips, zh_clips):
    # 27 s of English, then Mandarin: two windows of one channel, each decoded in its own language
    pause = np.zeros(8_000, np.float32)
    english = np.concatenate([np.concatenate([c.samples, pause]) for c in en_clips[:7]])
    mandarin = np.concatenate([np.concatenate([c.samples, pause]) for c in zh_clips[:5]])
    samples = np.concatenate([english, np.zeros(16_000, np.float32), mandarin])[None, :]
    result = engine.transcribe(CallAudio("switch", samples, 16_000, ("mixed",)))
    languages = [s.language for s in result.segments]
    assert "en" in languages and "zh" in languages
    assert languages.index("zh") > max(i for i, lang in enumerate(languages) if lang == "en")


def test_a_quiet_recording_is_transcribed_like_a_normal_one(engine):
    """The call 40 dB down, stored in G.711 u-law as a quiet line records it: raised to speech
    level before VAD and features, it reads as the normal one does."""
    data, _ = stereo_call_wav()
    audio, _ = sf.read(io.BytesIO(data), dtype="float32")
    buf = io.BytesIO()
    sf.write(buf, audio * np.float32(0.01), RATE, format="WAV", subtype="ULAW")
    result = engine.transcribe(load_call_audio(buf.getvalue(), roles={0: "agent", 1: "customer"}))
    assert [s.role for s in result.segments] == ["agent", "customer", "agent", "customer"]
    refs = [normalize_en(text) for _, _, text in TURNS]
    assert jiwer.wer(refs, [normalize_en(s.text) for s in result.segments]) <= 0.25


def _sox_speed(samples: np.ndarray, rate: int, factor: float) -> np.ndarray:
    """sox ``speed``: slower and lower at once, as a slowed second voice on a trunk sounds."""
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="WAV", subtype="FLOAT")
    out = subprocess.run(["sox", "-t", "wav", "-", "-t", "wav", "-", "speed", str(factor)],
                         input=buf.getvalue(), capture_output=True, check=True).stdout
    slowed, native = sf.read(io.BytesIO(out), dtype="float32")
    return soxr.resample(slowed, native, rate).astype(np.float32)


def _mono_mix(turns: list[tuple[str, np.ndarray]], rate: int, gap_s: float) -> tuple[CallAudio, list[tuple[float, float]]]:
    parts, spans, t = [], [], 0.0
    for _, samples in turns:
        spans.append((t, t + samples.size / rate))
        parts += [samples, np.zeros(int(gap_s * rate), np.float32)]
        t += samples.size / rate + gap_s
    return CallAudio(samples=np.concatenate(parts)[None, :], sample_rate=rate, roles=("mixed",), call_id="mono"), spans


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_slowed_lower_second_voice_on_a_mono_mix_keeps_every_turn(engine, zh_clips, language):
    """Whisper follows the voice a window opens with and steps over a second, slower and quieter
    one (it timed the next turn straight after the first): every turn of both parties must come out."""
    rate = 16_000
    if language == "zh":
        texts = [(c.text, c.samples) for c in zh_clips[12:20]]
    else:
        texts = [(t, speak(t, rate, "en-gb" if i % 2 else "en-us")) for i, t in enumerate(
            ("Thank you for calling the billing line, how can I help?", "I was charged twice for the same order.",
             "Let me check the payments on your account.", "It was last Tuesday, around lunch time.",
             "I can see both charges, I will refund one now.", "Thank you, how long will that take?"))]
    turns = [(text, samples if i % 2 == 0 else _sox_speed(samples, rate, 0.82) * 10 ** (-4 / 20))
             for i, (text, samples) in enumerate(texts)]
    call, spans = _mono_mix(turns, rate, gap_s=0.7)
    result = engine.transcribe(call)
    units = (lambda t: list(normalize_zh(t).replace(" ", ""))) if language == "zh" else (
        lambda t: normalize_en(t).split())
    for (text, _), (start_s, end_s) in zip(turns, spans):
        # a segment may run across the short pause into the next turn: count the turn's words found
        heard = Counter(u for s in result.segments if s.start_s < end_s and start_s < s.end_s for u in units(s.text))
        said = Counter(units(text))
        assert sum((said & heard).values()) >= 0.6 * sum(said.values()), (text, heard)


def test_a_call_in_a_third_language_is_transcribed_as_spoken_and_flagged(engine):
    """Told to choose between English and Mandarin, Whisper decoded a French call as English and
    translated it: QA then judged words nobody said. Another language is transcribed in itself."""
    rate = 16_000
    speech = np.concatenate([speak("Buenos días, llamo porque mi paquete no llegó el viernes.", rate, "es"),
                             np.zeros(rate, np.float32),
                             speak("Quisiera saber dónde está y cuándo llega.", rate, "es")])
    call = CallAudio(samples=speech[None, :], sample_rate=rate, roles=("mixed",), call_id="es-1")
    result = engine.transcribe(call)
    words = normalize_en(result.text).split()
    assert result.languages == {0: "es"} and result.unsupported == {0: "es"}
    assert result.language_probs[0] >= 0.5
    assert "paquete" in words and "package" not in words, result.text
    # the two candidate languages are never flagged
    data, _ = stereo_call_wav()
    english = engine.transcribe(load_call_audio(data, roles={0: "agent", 1: "customer"}))
    assert english.unsupported == {} and set(english.languages.values()) == {"en"}


def test_part_of_a_window_is_decoded_in_the_language_its_window_was_heard_in(engine):
    """A later pass decodes a few seconds cut from a window (its rest after a loop, a piece judged
    alone). Detected anew on so little, a 3.8 s piece of an English GSM call was heard as Thai
    (outside the candidates: decoded as Thai), looped, and the turn came out with no text. Such a
    part is decoded in the language its window was heard in; a window of its own is still detected."""
    from types import SimpleNamespace

    from pipeline.asr.decode import DecodeStats, Heard
    from pipeline.asr.packing import pack_regions

    stream = speak("Buenos días, llamo porque mi paquete no llegó el viernes.", 16_000, "es")
    (packed,) = pack_regions([(0, len(stream))])
    item = SimpleNamespace(packed=packed, stream=stream, duration_s=packed.duration_s)
    bucket_s = next(b for b in engine.buckets_s if b >= packed.duration_s)
    english = Heard("en", 0.97, False)
    results = []
    for heard in (None, english):
        memory = engine.encode_windows(bucket_s, [item])
        results += engine.decoder.decode([memory], engine.pool.kv_cache(bucket_s, 1), [packed.duration_s],
                                         DecodeStats(), heard=[heard])
    detected, given = results
    assert (detected.language, detected.foreign) == ("es", True)
    assert (given.language, given.language_prob, given.foreign) == ("en", 0.97, False)
    assert given.heard == english


def test_a_turn_that_loops_from_its_start_is_decoded_again_warmer_not_dropped(engine):
    # A customer's card-number turn (12 s, one VAD region) on 8 kHz u-law, where the greedy decode
    # runs into a digit loop from its first segment: nothing of it could be kept, and the turn came
    # out as no text at all, uncounted. It is now decoded again at Whisper's fallback temperatures.
    from tools.word_calls import english_call, to_ulaw_8k

    call = english_call("dev", 2, 1)
    customer = to_ulaw_8k(call.audio)[1:2, int(42.5 * RATE) : int(55.5 * RATE)]
    (t,) = engine.transcribe_batch([CallAudio("loop", customer, RATE, ("customer",))])
    words = " ".join(s.text for s in t.segments).lower().replace(".", " ").replace(",", " ").split()
    digits = [w for w in words if w.isdigit() or w in DIGIT_WORDS]
    assert "card" in words and len(digits) >= 6, words
