"""Packed windows and timed text, pure: offset maps, joins, timestamp pairs, splitting, loops."""

from __future__ import annotations

import pytest

from pipeline.asr.packing import RATE, pack_regions
from pipeline.asr.timing import (
    Coverage,
    TimedSpan,
    call_segments,
    compression_ratio,
    coverage,
    skipped_pieces,
    timed_spans,
    window_texts,
)

S = RATE
TB = 50_000  # a timestamp_begin for the token tests
STEP = 0.02


def regions(*spans_s: tuple[float, float]) -> list[tuple[int, int]]:
    return [(int(a * S), int(b * S)) for a, b in spans_s]


def ts(t_s: float) -> int:
    return TB + round(t_s / STEP)


def test_turns_are_packed_with_silence_removed_and_a_fixed_gap():
    # one party's turns, the other party talking in between
    [window] = pack_regions(regions((1, 4), (10, 13), (20, 22)), max_window_s=30, gap_s=0.3)
    assert [(p.src_start / S, p.src_end / S, p.dst_start / S) for p in window.pieces] == [
        (1, 4, 0), (10, 13, 3.3), (20, 22, 6.6)]
    assert window.duration_s == pytest.approx(8.6) and window.speech_s == pytest.approx(8)
    assert (window.start_s, window.end_s) == (1, 22)


def test_short_pauses_stay_in_place_and_windows_fill_to_the_limit():
    # 5 s utterances 0.2 s apart are one piece each pair; windows never pass 12 s and never cut speech
    spans = [(i * 5.2, i * 5.2 + 5) for i in range(6)]
    windows = pack_regions(regions(*spans), max_window_s=12, gap_s=0.3)
    assert all(w.duration_s <= 12 + 1e-9 for w in windows)
    starts = {int(a * S) for a, _ in spans}
    assert all(p.src_start in starts for w in windows for p in w.pieces)
    assert sum(w.speech_s for w in windows) == pytest.approx(30, abs=1e-3)
    assert [len(w.pieces) for w in windows] == [1, 1, 1]  # 10.2 s pieces of two utterances each


def test_a_region_longer_than_the_limit_is_cut():
    windows = pack_regions(regions((0, 70)), max_window_s=30)
    assert [(w.start_s, w.end_s) for w in windows] == [(0, 30), (30, 60), (60, 70)]


def test_window_time_maps_to_call_time_and_gaps_snap_to_speech():
    [window] = pack_regions(regions((1, 4), (10, 13)), gap_s=0.3)
    assert window.to_call_s(1.0, "start") == pytest.approx(2.0)
    assert window.to_call_s(3.5, "end") == pytest.approx(10.2)
    assert window.to_call_s(3.1, "start") == pytest.approx(10.0)  # in the gap: the next piece starts
    assert window.to_call_s(3.1, "end") == pytest.approx(4.0)  # ... or the previous one ends
    assert window.to_call_s(99, "end") == pytest.approx(13.0)
    assert [len(p.pieces) for p in window.unpacked()] == [1, 1]
    assert [p.speech_s for p in window.unpacked()] == pytest.approx([3, 3])


def test_timestamp_pairs_cut_segments():
    tokens = [ts(0), 1, 2, ts(2.0), ts(2.5), 3, ts(4.0)]
    assert timed_spans(tokens, TB, STEP, window_s=10) == [
        TimedSpan(0.0, 2.0, (1, 2)), TimedSpan(2.5, 4.0, (3,))]
    # the token cap cut the last segment: it runs to the window's end; times clamp to the window
    assert timed_spans([ts(1.0), 7, 8], TB, STEP, window_s=5) == [TimedSpan(1.0, 5.0, (7, 8), closed=False)]
    assert timed_spans([ts(0), 1, ts(9.0)], TB, STEP, window_s=6) == [TimedSpan(0.0, 6.0, (1,))]
    assert timed_spans([ts(0), 1, ts(1.0), ts(1.0), 2], TB, STEP, window_s=6)[-1].closed is False
    assert timed_spans([ts(0), ts(1.0)], TB, STEP, window_s=6) == []


def test_a_segment_across_a_far_join_is_split_at_a_clause_end():
    [window] = pack_regions(regions((1, 4), (10, 11.5)), gap_s=0.3)
    span = TimedSpan(0.0, 4.8, (1,))
    parts = call_segments(span, "Hello, my internet stopped working, thank you very much.", window, 1.0)
    assert [p.text for p in parts] == ["Hello, my internet stopped working,", "thank you very much."]
    assert [(p.start_s, p.end_s) for p in parts] == [pytest.approx((1.0, 4.0)), pytest.approx((10.0, 11.5))]
    # Chinese text splits between characters
    zh = call_segments(span, "您好，请问有什么可以帮您？谢谢。", window, 1.0)
    assert "".join(p.text for p in zh) == "您好，请问有什么可以帮您？谢谢。" and len(zh) == 2


def test_near_joins_and_slivers_are_not_split():
    [window] = pack_regions(regions((1, 4), (4.5, 6)), gap_s=0.3)  # pause 0.5 s: not a turn change
    parts = call_segments(TimedSpan(0.0, 4.8, (1,)), "one two three four", window, min_pause_s=1.0)
    assert [(p.text, p.start_s, p.end_s) for p in parts] == [("one two three four", 1.0, 6.0)]
    [window] = pack_regions(regions((1, 4), (10, 13)), gap_s=0.3)
    # the model's segment starts 0.1 s before the join: the sliver gets no text
    parts = call_segments(TimedSpan(2.9, 6.3, (1,)), "I am sorry for that", window, min_pause_s=1.0)
    assert [p.text for p in parts] == ["I am sorry for that"] and parts[0].start_s == pytest.approx(10.0)
    # ... and a sliver at the end gets none either, whatever the punctuation
    parts = call_segments(TimedSpan(0.0, 3.4, (1,)), "Yes, I am sorry for that", window, min_pause_s=1.0)
    assert [p.text for p in parts] == ["Yes, I am sorry for that"] and parts[0].end_s == pytest.approx(4.0)


def spans_of(*items: tuple[float, float, str, bool]) -> list[tuple[TimedSpan, str]]:
    return [(TimedSpan(a, b, (1,), closed), text) for a, b, text, closed in items]


def test_repeats_and_word_less_texts_are_dropped_and_loops_compress_well():
    [window] = pack_regions(regions((0, 10)))
    spans = spans_of((0, 2, "again", True), (2, 4, "again", True), (4, 5, " 。 ", True), (5, 6, "done", True))
    assert [t.text for t in window_texts(spans, window, 1.0)] == ["again", "done"]
    assert compression_ratio("thank you " * 30) > 2.4 > compression_ratio("Thank you for calling, how can I help?")


def test_decoding_resumes_after_a_loop_a_cut_or_an_early_end():
    [window] = pack_regions(regions((0, 10), (20, 30)), gap_s=0.3)  # a 20.3 s window
    good = spans_of((0, 4, "hello there", True), (4, 8, "how are you", True))
    assert coverage(good, window, True, 2.4, 1.0) == Coverage(2, 8.0)  # stopped 12 s early
    done = spans_of((0, 10, "hello there", True), (10.3, 19.8, "how are you", True))
    assert coverage(done, window, True, 2.4, 1.0) == Coverage(2, None)
    looped = good + spans_of((8, 9, "how are you", True), (9, 10, "how are you", True))
    assert coverage(looped, window, True, 2.4, 1.0) == Coverage(2, 8.0, mid_turn=True)  # stopped reading speech
    cut = good + spans_of((8, 20.3, "and then", False))
    assert coverage(cut, window, False, 2.4, 1.0) == Coverage(2, 8.0, mid_turn=True)
    assert coverage(spans_of((0, 5, "la " * 40, True)), window, True, 2.4, 1.0) == Coverage(0, 0.0, mid_turn=True)
    # the model's own end-of-text after an open span: the span runs to the window's end
    assert coverage(good + spans_of((8, 20.3, "and then", False)), window, True, 2.4, 1.0) == Coverage(
        3, None)
    # a loop that starts at the window's very end (an open span of no duration) is not kept
    full = good + spans_of((8, 20.3, "and then", True))
    at_end = full + spans_of((20.3, 20.3, "音的通话将会被录音" * 12, False))
    assert coverage(at_end, window, False, 2.4, 1.0) == Coverage(3, 20.3, mid_turn=True)
    # the window read again from the top at its end: an earlier span's text once more, or text
    # written into almost no audio, ends the good part
    restart = spans_of((0, 4, "hello there, how are you", True), (4, 9, "fine thanks", True),
                       (19.5, 20.3, "hello there, how are you today", True))
    assert coverage(restart, window, False, 2.4, 1.0) == Coverage(2, 9.0, mid_turn=True)
    rushed = [(TimedSpan(0, 4, (1,) * 10), "hello there"), (TimedSpan(4, 4.1, (1,) * 12), "a whole new sentence here")]
    assert coverage(rushed, window, True, 2.4, 1.0) == Coverage(1, 4.0, mid_turn=True)
    # a short reply said twice in a window is speech, not a loop
    twice = spans_of((0, 1, "Okay.", True), (1, 3, "I see what you mean", True), (3, 4, "Okay.", True))
    assert coverage(twice, window, True, 2.4, 1.0).kept == 3


def test_the_rest_of_a_window_keeps_its_call_times():
    [window] = pack_regions(regions((1, 4), (10, 13), (20, 22)), gap_s=0.3)
    rest = window.after(4.3)  # one second into the second piece
    assert [(p.src_start / S, p.src_end / S, p.dst_start / S) for p in rest.pieces] == [(11, 13, 0), (20, 22, 2.3)]
    assert rest.speech_s == pytest.approx(4)
    assert window.after(3.1).pieces[0].src_start == 10 * S  # in a gap: from the next piece
    assert window.after(9.0) is None


def test_windows_are_balanced_instead_of_leaving_a_short_stub():
    # greedy filling gives 27.6 s + a 4 s stub; balancing keeps two windows, evened out
    spans = regions((0, 9), (20, 29), (40, 49), (60, 64))
    assert [round(w.duration_s, 1) for w in pack_regions(spans, gap_s=0.3, balance=False)] == [27.6, 4.0]
    windows = pack_regions(spans, gap_s=0.3)
    assert [round(w.duration_s, 1) for w in windows] == [18.3, 13.3]
    assert [p.src_start for w in windows for p in w.pieces] == [int(a * S) for a in (0, 20, 40, 60)]


def test_speech_a_decode_steps_over_is_found_and_laid_out_alone():
    # three turns of one channel in one window; the model's spans skip the middle one (another
    # voice on a mono mix) and time the third after it
    [window] = pack_regions(regions((0, 4), (6, 9), (12, 16)), gap_s=0.3)
    spans = spans_of((0, 4, "first turn", True), (7.6, 11.6, "third turn", True))
    cover = coverage(spans, window, True, 2.4, 1.0)
    assert cover == Coverage(2, None, (1,))
    again = window.only(cover.skipped, 0.3)
    assert [(p.src_start / 16_000, p.src_end / 16_000, p.dst_start) for p in again.pieces] == [(6.0, 9.0, 0)]
    # covered turns, a span of punctuation only, and short blips are not reported
    assert coverage(spans_of((0, 4, "a", True), (4.3, 7.3, "b", True), (7.6, 11.6, "c", True)),
                    window, True, 2.4, 1.0).skipped == ()
    assert skipped_pieces(spans_of((0, 4, "a", True), (4.3, 7.3, " . ", True)), window, 7.3) == (1,)
    [blips] = pack_regions(regions((0, 4), (5, 5.3), (6, 10)), gap_s=0.3)
    assert coverage(spans_of((0, 4, "a", True), (4.6, 8.6, "b", True)), blips, True, 2.4, 1.0).skipped == ()
    # pieces after the resume point are decoded again with the rest, not twice
    early = coverage(spans_of((0, 4, "first turn", True)), window, True, 2.4, 1.0)
    assert early.resume_s == 4.0 and early.skipped == ()


def test_a_decode_that_reads_its_window_again_with_audio_ahead_is_not_trusted():
    # a customer's five turns in one window: the model wrote turns 3 to 5 from time 0 (its clock
    # ahead of the audio: turns 1 and 2 got no text, yet look covered), then read turns 3 and 4
    # again with 15 s of audio still ahead
    [window] = pack_regions(regions((0, 3), (4, 7), (8, 11), (12, 16), (17, 27)), gap_s=0.3)
    said = spans_of((0, 2, "I am free after two on weekdays.", True),
                    (2, 6, "You can call me back on six one.", True),
                    (6, 8, "Hello, I want to know what happened.", True))
    again = spans_of((8, 10, "I am free after two on weekdays.", True), (10, 13, "You can call me back on six one.", True))
    cover = coverage(said + again, window, False, 2.4, 1.0)
    assert cover.rewound and cover.kept == 3
    # one sentence said again (calls repeat themselves) is a plain loop at most ...
    assert not coverage(said + again[:1], window, False, 2.4, 1.0).rewound
    assert not coverage(said + again[:1] + spans_of((10, 13, "and something new", True)),
                        window, False, 2.4, 1.0).rewound
    # ... as is the last span said once more, a stretch read again at the window's very end, or
    # all of it again in a rushed span there
    stutter = spans_of((8, 10, "Hello, I want to know what happened.", True), (10, 13, "You can call me back.", True))
    assert not coverage(said + stutter, window, False, 2.4, 1.0).rewound
    late = spans_of((23.3, 23.8, "I am free after two on weekdays.", True), (23.8, 24.2, "You can call me back on six one.", True))
    assert not coverage(said + late, window, False, 2.4, 1.0).rewound
    rushed = spans_of((8, 10, "I am free after two on weekdays.", True),
                      (10, 10.05, "You can call me back on six one. Hello, I want to know what happened.", True))
    assert not coverage(said + rushed, window, False, 2.4, 1.0).rewound
