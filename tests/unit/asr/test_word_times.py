"""Word times from the engine (the alignment hook): exact word times of words spoken one by one."""

from __future__ import annotations

import numpy as np

from pipeline.asr.audio import CallAudio
from pipeline.asr.engine import Engine
from tools.eval_words import match_errors, sentence


def test_card_words_are_timed_within_60_ms_median(engine: Engine) -> None:
    rng = np.random.default_rng(11)
    audio, truth = sentence(
        "Sure, my card number is four five three two zero one five one one two eight three zero three six six", rng
    )
    call = np.zeros((1, len(audio) + 16_000), dtype=np.float32)
    call[0, 8000 : 8000 + len(audio)] = audio * 0.6
    truth = [(s + 0.5, e + 0.5, w) for s, e, w in truth]
    (t,) = engine.transcribe_batch([CallAudio("w", call, 16_000, ("customer",))])
    timed = [s for s in t.segments if s.words is not None]
    assert timed, "the segment holding a card number gets word times by default"
    for s in timed:
        assert " ".join(w for _, _, w in s.words) == " ".join(s.text.split())
        assert all(a <= b for a, b, _ in s.words)
        assert all(s.words[k][0] <= s.words[k + 1][0] for k in range(len(s.words) - 1))
    errors = match_errors([w for s in timed for w in s.words], truth)
    assert len(errors) >= 5 and float(np.median(errors)) <= 0.06


def test_each_segments_words_stay_within_its_own_time(engine: Engine) -> None:
    # a card number, then the security code 5 s later on the same channel: both hold PII, so both are
    # aligned, packed into one window; the card's last digits were placed in the code's audio (+5.5 s)
    from pipeline.asr.alignment import PAD_S
    from tools.eval_words import english_call

    stereo, _ = english_call(np.random.default_rng(8))
    (t,) = engine.transcribe_batch([CallAudio("w2", stereo.sum(axis=0, keepdims=True), 16_000, ("mixed",))])
    timed = [s for s in t.segments if s.words]
    assert len(timed) >= 2, [s.text for s in t.segments]
    for s in timed:
        assert all(s.start_s - PAD_S <= a <= b <= s.end_s + PAD_S for a, b, _ in s.words), (s.start_s, s.end_s, s.words)
