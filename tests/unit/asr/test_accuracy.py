"""Accuracy on real speech: English (espeak-ng) WER, Mandarin (neural voice) CER, language detection."""

from __future__ import annotations

from dataclasses import replace

import jiwer

from pipeline.asr import CallTranscript
from pipeline.asr.decode import GreedyDecoder
from pipeline.asr.text import normalize_en, normalize_zh
from tests.unit.asr.speech import Clip


def english_wer(clips: list[Clip], results: list[CallTranscript]) -> float:
    return jiwer.wer([normalize_en(c.text) for c in clips], [normalize_en(r.text) for r in results])


def mandarin_cer(clips: list[Clip], results: list[CallTranscript]) -> float:
    return jiwer.cer([normalize_zh(c.text) for c in clips], [normalize_zh(r.text) for r in results])


def test_english_wer_at_most_10_percent(en_clips, en_batched):
    assert english_wer(en_clips, en_batched) <= 0.10


def test_mandarin_cer_at_most_15_percent_in_simplified(zh_clips, zh_batched):
    assert mandarin_cer(zh_clips, zh_batched) <= 0.15
    joined = "".join(r.text for r in zh_batched)
    # Whisper base tends to write Traditional characters; the engine converts them
    assert "這" not in joined and "裡" not in joined and "這裡" not in joined


def test_language_detected_per_channel(en_batched, zh_batched):
    assert {r.languages[0] for r in en_batched} == {"en"}
    assert {r.languages[0] for r in zh_batched} == {"zh"}
    assert all(s.language == "zh" for r in zh_batched for s in r.segments)


def test_forced_language_skips_detection(engine, en_calls, en_batched):
    detector = engine.decoder
    try:
        engine.decoder = GreedyDecoder(engine.model, engine.tokenizer, replace(detector.opts, language="en"))
        forced = engine.transcribe(en_calls[0])
        engine.decoder = GreedyDecoder(engine.model, engine.tokenizer, replace(detector.opts, language="zh"))
        wrong = engine.transcribe(en_calls[0])
    finally:
        engine.decoder = detector
    assert forced.languages == {0: "en"} and forced.text == en_batched[0].text
    assert wrong.languages == {0: "zh"}


def test_an_initial_prompt_biases_spelling_without_hurting_accuracy(en_clips, en_calls, zh_clips, zh_calls, en_batched):
    # Hotwords reach the decoder as <|startofprev|> prompt <|startoftranscript|> …: the same
    # speech is still transcribed as well, in the same language, with the prompt's spellings.
    from pipeline.asr import Engine
    from tests.unit.asr.conftest import ENGINE_OPTIONS

    prompted = Engine.load(replace(ENGINE_OPTIONS, initial_prompt="Platinum Plus card, 尊享白金卡, this call is recorded."))
    assert prompted.decoder.opts.prompt_tokens
    en = prompted.transcribe_batch(en_calls)
    zh = prompted.transcribe_batch(zh_calls[:8])
    assert english_wer(en_clips, en) <= english_wer(en_clips, en_batched) + 0.02
    assert mandarin_cer(zh_clips[:8], zh) <= 0.15
    assert {r.languages[0] for r in en} == {"en"} and {r.languages[0] for r in zh} == {"zh"}
