"""Word times from attention: DTW on small fixed matrices, normalisation, word grouping."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.asr.dtw import Word, alignment_matrix, dtw, group_words, median_filter, snap_to_onsets, token_frames
from pipeline.asr.packing import PackedWindow, Piece


def test_dtw_follows_the_cheap_band() -> None:
    # three tokens over eight frames: token 0 on frames 0-1, token 1 on 2-5, token 2 on 6-7
    cost = np.ones((3, 8))
    cost[0, 0:2] = cost[1, 2:6] = cost[2, 6:8] = 0.0
    first, last = dtw(cost)
    assert first.tolist() == [0, 2, 6]
    assert last.tolist() == [1, 5, 7]


def test_dtw_path_is_monotonic_and_covers_every_frame() -> None:
    rng = np.random.default_rng(3)
    cost = rng.random((6, 40))
    first, last = dtw(cost)
    assert first[0] == 0 and last[-1] == 39
    assert all(first[i] <= last[i] for i in range(6))
    assert all(first[i + 1] in (last[i], last[i] + 1) for i in range(5))


def test_dtw_matches_a_plain_recurrence() -> None:
    rng = np.random.default_rng(5)
    cost = rng.random((5, 17))
    total = np.full((6, 18), np.inf)
    total[0, 0] = 0.0
    for i in range(1, 6):
        for j in range(1, 18):
            total[i, j] = cost[i - 1, j - 1] + min(total[i - 1, j - 1], total[i - 1, j], total[i, j - 1])
    first, last = dtw(cost)
    path_cost = sum(cost[i, j] for i in range(5) for j in range(first[i], last[i] + 1))
    assert path_cost == pytest.approx(total[5, 17])  # the path found is a cheapest one


def test_dtw_rejects_fewer_frames_than_tokens() -> None:
    with pytest.raises(ValueError):
        dtw(np.zeros((4, 3)))


def test_attention_on_a_fixed_matrix_gives_token_frames() -> None:
    # two heads attending, for each of three tokens, to its own frames (logits 4 there, 0 elsewhere)
    scores = np.zeros((2, 3, 30))
    scores[:, 0, 3:10] = 4.0
    scores[:, 1, 10:20] = 4.0
    scores[:, 2, 20:26] = 4.0
    start, end = token_frames(scores, width=3)
    assert start.tolist() == [0, 10, 20]  # the first token takes the lead-in, the last the tail
    assert end.tolist() == [10, 20, 30]


def test_median_filter_removes_a_spike() -> None:
    x = np.zeros((1, 9))
    x[0, 4] = 10.0
    assert median_filter(x, 3).max() == 0.0
    assert median_filter(x, 1) is x


def test_alignment_matrix_shape_and_errors() -> None:
    assert alignment_matrix(np.zeros((4, 2, 10))).shape == (2, 10)
    with pytest.raises(ValueError):
        alignment_matrix(np.zeros((2, 10)))


def test_words_from_spaced_pieces() -> None:
    pieces = [
        (" My", 0.0, 0.2),
        (" card", 0.2, 0.5),
        (" is", 0.5, 0.6),
        (" 45", 0.6, 0.8),
        ("32", 0.8, 1.0),
        (",", 1.0, 1.0),
        (" one", 1.1, 1.3),
    ]
    words = group_words(pieces, spaced=True)
    assert [w.text for w in words] == ["My", "card", "is", "4532,", "one"]
    assert words[3] == Word(0.6, 1.0, "4532,")


def test_words_from_chinese_pieces_one_character_each() -> None:
    words = group_words([("卡号", 0.0, 0.4), ("是", 0.4, 0.6), ("。", 0.6, 0.6), ("6222", 0.7, 1.2)], spaced=False)
    assert [w.text for w in words] == ["卡", "号", "是。", "6222"]
    assert words[0].end_s == pytest.approx(0.2) and words[1].start_s == pytest.approx(0.2)


def test_a_whitespace_token_starts_the_next_word() -> None:
    # the tokenizer writes " thanks" as " ", "th", "anks": the word starts at the space token
    pieces = [(" Great", 0.0, 0.3), (" ", 0.32, 0.36), ("th", 0.36, 0.45), ("anks", 0.45, 0.7), (" a", 0.7, 0.8)]
    words = group_words(pieces, spaced=True)
    assert [w.text for w in words] == ["Great", "thanks", "a"]
    assert words[1] == Word(0.32, 0.7, "thanks")


def _speech(spans_s: list[tuple[float, float]], total_s: float, rate: int = 16_000) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = np.zeros(int(total_s * rate), dtype=np.float32)
    for a, b in spans_s:
        x[int(a * rate) : int(b * rate)] = rng.uniform(-0.5, 0.5, int(b * rate) - int(a * rate))
    return x


def test_a_start_early_in_a_long_pause_moves_to_the_onset() -> None:
    # a word said from 1.5 s, after a 1 s pause; the path put its start 0.5 s early (past the search span)
    audio = _speech([(0.0, 0.5), (1.5, 2.0)], 2.5)
    (w,) = snap_to_onsets([Word(1.0, 2.0, "code")], audio, 16_000)
    assert w.start_s == pytest.approx(1.5, abs=0.011)


def test_the_onset_after_a_quiet_point_may_lie_past_the_search_span() -> None:
    # the pause (1.25-1.45 s) starts inside the span (start 1.0 + 0.35 s) but the word's onset is after it
    audio = _speech([(0.0, 1.25), (1.45, 2.0)], 2.5)
    (w,) = snap_to_onsets([Word(1.0, 2.0, "please")], audio, 16_000)
    assert w.start_s == pytest.approx(1.45, abs=0.011)


def test_words_over_a_packing_join_stay_in_their_own_piece() -> None:
    # piece A: call 1.0-1.5 s at window 0-0.5 s (frames 0-24: a word on 10-17, then its tail of silence);
    # a 0.3 s join; piece B: call 5.0-5.2 s at window 0.8-1.0 s (frames 40-49: a word on 42-49)
    window = PackedWindow((Piece(16_000, 24_000, 0, 8_000), Piece(80_000, 83_200, 12_800, 3_200)))
    scores = np.zeros((2, 3, 50))
    scores[:, 0, 0:10] = scores[:, 1, 10:18] = scores[:, 2, 42:50] = 6.0
    start, end = token_frames(scores, width=3)
    spans = [window.span_to_call_s(start[i] * 0.02, end[i] * 0.02) for i in range(3)]
    assert spans[1][1] <= 1.5  # the word in piece A ends there, not inside the other turn
    assert spans[2][0] >= 5.0  # the word in piece B starts there, not in piece A's trailing silence
    assert all(a <= b for a, b in spans)


def test_the_first_word_of_a_piece_is_searched_from_the_piece_start() -> None:
    # a piece from 0 s, its first word said from 0.3 s; the word before it (another turn) took the
    # join's frames and the lead-in, so the path starts this one late, at 0.55 s, inside the word
    audio = _speech([(0.3, 0.8)], 1.2)
    (late,) = snap_to_onsets([Word(0.55, 0.8, "the")], audio, 16_000)
    assert late.start_s == 0.55  # nothing quiet near a start inside the word: left alone
    (w,) = snap_to_onsets([Word(0.55, 0.8, "the")], audio, 16_000, earliest=[0.0])
    assert w.start_s == pytest.approx(0.3, abs=0.011)


def test_a_digit_whose_span_holds_the_pause_after_it_keeps_its_own_onset() -> None:
    # digits at 1.0-1.3 s and 1.42-1.7 s (a quieter 80 ms gap behind a 60 ms one before): the path
    # starts the first 0.08 s early and ends it, with its comma, at 1.5 s, inside the next digit
    audio = _speech([(0.5, 0.94), (1.0, 1.3), (1.42, 1.7)], 2.0)
    audio[int(0.94 * 16_000) : int(1.0 * 16_000)] = 0.002  # line noise in the first gap only
    w, nxt = snap_to_onsets([Word(0.92, 1.5, "4,"), Word(1.5, 1.7, "6")], audio, 16_000)
    assert w.start_s == pytest.approx(1.0, abs=0.011)  # not the next digit's onset (1.42 s)


def test_a_word_given_only_pause_starts_at_the_next_sound() -> None:
    # the call's first word said from 0.5 s; the path gave it 0.09-0.39 s (line noise only) and
    # put the next word over its audio
    rng = np.random.default_rng(1)
    audio = _speech([(0.5, 0.8), (0.9, 1.3)], 1.6) + rng.normal(0, 0.003, 25_600).astype(np.float32)
    first, second = snap_to_onsets([Word(0.09, 0.39, "这"), Word(0.39, 0.69, "个")], audio, 16_000)
    assert first.start_s == pytest.approx(0.5, abs=0.011)
    assert second.start_s >= first.start_s
