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
