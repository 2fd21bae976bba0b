"""Word times from the engine (the alignment hook): exact word times of words spoken one by one."""

from __future__ import annotations

import numpy as np

from pipeline.asr.alignment import WordAligner, _AlignWindow
from pipeline.asr.audio import CallAudio
from pipeline.asr.engine import Engine
from pipeline.asr.packing import PackedWindow, Piece
from pipeline.asr.transcript import Segment
from tools.word_calls import english_call, match_errors, sentence


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


def test_words_at_a_packing_join_stay_in_their_turn_and_the_next_starts_at_its_onset(engine: Engine) -> None:
    # piece A: call 1.0-2.0 s at window 0-1.0 s (speech 1.2-1.8 s); a 0.3 s join; piece B: call
    # 5.0-6.0 s at window 1.3-2.3 s (speech 5.3-5.8 s). The path hands the join's frames and B's
    # lead-in to A's last token and starts B's first word late, inside it (as on tools/eval_words).
    rng = np.random.default_rng(1)
    stream = np.zeros(7 * 16_000, dtype=np.float32)
    for a, b in ((1.2, 1.8), (5.3, 5.8)):
        stream[int(a * 16_000) : int(b * 16_000)] = rng.uniform(-0.5, 0.5, int((b - a) * 16_000))
    packed = PackedWindow((Piece(16_000, 32_000, 0, 16_000), Piece(80_000, 96_000, 20_800, 16_000)))
    segments = [Segment("agent", 0, 1.2, 1.8, "Hello there.", "en"), Segment("agent", 0, 5.3, 5.8, "Code", "en")]
    tok = engine.tokenizer
    first, second = tok.encode(" Hello there."), tok.encode(" Code")
    assert tok.piece(first[-1:]) == "." and len(second) == 1
    # frames of 20 ms: "Hello there" on 10-45 (window 0.2-0.9 s), "." from 0.9 s to 1.76 s,
    # "Code" on 88-115 (window 1.76-2.3 s)
    start = np.array([*np.linspace(10, 45, len(first), dtype=int)[:-1].tolist(), 45, 88])
    end = np.array([*start[1:].tolist(), 115])
    aligner = WordAligner.__new__(WordAligner)
    aligner.engine = engine
    item = _AlignWindow(0, 0, packed, stream, (0, 1))
    words = aligner._words(item, segments, first + second, [0] * len(first) + [1], start, end)
    assert words[0][-1][2] == "there." and words[0][-1][1] <= 2.0  # not mapped into the other turn
    assert words[1][0][2] == "Code" and abs(words[1][0][0] - 5.3) <= 0.011


def test_each_segments_words_stay_within_its_own_time(engine: Engine) -> None:
    # a card number, its security code and an account number on a mono mix: each holds PII, so each is
    # aligned, packed into one window; the card's last digits were once placed in the code's audio
    from pipeline.asr.alignment import PAD_S

    stereo = english_call("dev", 1, 0).audio
    (t,) = engine.transcribe_batch([CallAudio("w2", stereo.sum(axis=0, keepdims=True), 16_000, ("mixed",))])
    timed = [s for s in t.segments if s.words]
    assert len(timed) >= 2, [s.text for s in t.segments]
    for s in timed:
        assert all(s.start_s - PAD_S <= a <= b <= s.end_s + PAD_S for a, b, _ in s.words), (s.start_s, s.end_s, s.words)


def test_segments_a_long_run_was_cut_over_are_both_timed() -> None:
    # the backstop masks a run cut over two segments in both, so both need word times for the audio cut
    from pipeline.asr.alignment import segments_to_time
    from pipeline.asr.transcript import Segment

    segments = [
        Segment("agent", 0, 28.0, 30.0, "请问您的号码", "zh"),
        Segment("customer", 1, 30.4, 36.3, "全份证号马是32010211967", "zh"),
        Segment("customer", 1, 36.3, 39.5, "618102010", "zh"),
        Segment("customer", 1, 45.0, 47.0, "好的谢谢", "zh"),
    ]
    assert segments_to_time(segments, "pii") == [1, 2]
