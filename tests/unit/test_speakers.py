"""Mono-call speaker separation, the pure part: the clustering decision and the role naming."""

from __future__ import annotations

import numpy as np

from pipeline.stages.speakers import (
    Clustering,
    Labelled,
    Turn,
    assign_roles,
    cluster_two,
    embedding_windows,
    label_segments,
    speaker_turns,
    split_at_changes,
)

PHRASES = ("my name is", "this call is recorded", "工号")


def _voices(n_a: int, n_b: int, spread: float, seed: int = 0) -> np.ndarray:
    """Unit vectors around two directions ``spread`` apart (0: one voice)."""
    rng = np.random.default_rng(seed)
    a = np.zeros(32)
    a[0] = 1.0
    b = np.zeros(32)
    b[0], b[1] = np.cos(spread), np.sin(spread)
    out = np.concatenate([a + 0.1 * rng.standard_normal((n_a, 32)), b + 0.1 * rng.standard_normal((n_b, 32))])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_two_distinct_voices_are_two_speakers() -> None:
    c = cluster_two(_voices(10, 8, spread=1.2))
    assert c.speakers == 2
    assert len(set(c.labels[:10])) == 1 and len(set(c.labels[10:])) == 1 and c.labels[0] != c.labels[-1]
    assert c.similarity < 0.85 and c.confidence.min() >= 0.5


def test_one_voice_stays_one_speaker() -> None:
    c = cluster_two(_voices(18, 0, spread=0.0))
    assert c.speakers == 1 and c.similarity > 0.85 and set(c.labels) == {0}


def test_a_sliver_of_a_second_cluster_is_not_a_second_speaker() -> None:
    assert cluster_two(_voices(40, 1, spread=1.2)).speakers == 1


def test_windows_slide_inside_long_regions_and_cover_short_ones_whole() -> None:
    rate = 16_000
    windows = embedding_windows([(0, 4 * rate), (5 * rate, 6 * rate), (7 * rate, 7 * rate + 1000)])
    assert windows[0] == (0, int(1.6 * rate)) and windows[-2][1] == 4 * rate
    assert (5 * rate, 6 * rate) in windows
    assert all(e <= 7 * rate for _, e in windows)  # under 0.5 s: no window of its own


def test_a_region_holding_both_voices_is_cut_where_the_voice_changes() -> None:
    rate = 16_000
    regions = [(0, 4 * rate)]
    windows = embedding_windows(regions)  # starts 0, 0.8, 1.6, 2.4 s
    labels = np.array([0, 0, 1, 1])
    turns = speaker_turns(regions, windows, Clustering(labels, np.ones(4), 0.6, 2), rate)
    assert [t.speaker for t in turns] == [0, 1]
    assert turns[0].start_s == 0.0 and turns[-1].end_s == 4.0
    assert 1.5 <= turns[0].end_s <= 2.5


def test_segments_take_the_speaker_they_overlap_most() -> None:
    turns = [Turn(0.0, 3.0, 0, 1.0), Turn(3.0, 6.0, 1, 0.9)]
    out = label_segments([(0.2, 2.8, "a"), (2.5, 6.0, "b")], turns)
    assert [s.speaker for s in out] == [0, 1]
    assert out[0].confidence == 1.0 and 0.7 < out[1].confidence < 0.9


def test_a_segment_across_a_change_of_speaker_is_cut_in_the_pause_at_the_clause_end() -> None:
    # agent 0-3.1 s, customer 3.6-5.0 s, decoded as one segment (a pause under the engine's split)
    turns = [Turn(0.0, 3.1, 0, 1.0), Turn(3.6, 5.0, 1, 1.0), Turn(6.0, 7.0, 0, 1.0)]
    text = "Thank you for calling, my name is Anna. I lost my card."
    parts = split_at_changes([(0.1, 5.0, text), (6.0, 7.0, "Let me check.")], turns)
    assert [(p.segment, p.text) for p in parts] == [
        (0, "Thank you for calling, my name is Anna."),
        (0, "I lost my card."),
        (1, "Let me check."),
    ]
    assert (parts[0].start_s, parts[0].end_s, parts[1].start_s, parts[1].end_s) == (0.1, 3.35, 3.35, 5.0)
    assert [s.speaker for s in label_segments([(p.start_s, p.end_s, p.text) for p in parts], turns)] == [0, 1, 0]


def test_a_sliver_of_the_other_voice_does_not_cut_a_segment() -> None:
    turns = [Turn(0.0, 3.0, 0, 1.0), Turn(3.0, 3.3, 1, 1.0), Turn(3.3, 5.0, 0, 1.0)]
    assert [p.text for p in split_at_changes([(0.0, 5.0, "one two three four")], turns)] == ["one two three four"]


def test_a_voice_given_no_text_lends_its_time_to_its_neighbour() -> None:
    # a long run of the second voice under a one-word text: the text goes to one side, but the
    # segment's whole time stays covered (speech coverage must not drop)
    turns = [Turn(0.0, 0.5, 0, 1.0), Turn(1.0, 4.0, 1, 1.0)]
    parts = split_at_changes([(0.0, 4.0, "Hello.")], turns)
    assert [(p.start_s, p.end_s, p.text) for p in parts] == [(0.0, 4.0, "Hello.")]
    turns = [Turn(0.0, 3.0, 0, 1.0), Turn(3.5, 4.0, 1, 1.0), Turn(4.5, 8.0, 0, 1.0)]
    parts = split_at_changes([(0.0, 8.0, "One two three. Four five six.")], turns)
    assert parts[0].start_s == 0.0 and parts[-1].end_s == 8.0
    assert all(a.end_s == b.start_s for a, b in zip(parts, parts[1:]))


def test_chinese_text_is_cut_between_characters_at_its_punctuation() -> None:
    turns = [Turn(0.0, 2.0, 0, 1.0), Turn(2.5, 4.5, 1, 1.0)]
    parts = split_at_changes([(0.0, 4.5, "您好，工号幺三五七。我要查话费。")], turns)
    assert [p.text for p in parts] == ["您好，工号幺三五七。", "我要查话费。"]


def _seg(speaker: int, text: str, start: float = 0.0) -> Labelled:
    return Labelled(start, start + 2.0, text, speaker, 1.0)


def test_the_speaker_saying_the_agent_phrases_is_the_agent() -> None:
    segs = [
        _seg(1, "Hello?"),
        _seg(0, "Thank you for calling, my name is Anna. This call is recorded."),
        _seg(1, "I lost my card."),
        _seg(0, "I am blocking it now."),
    ]
    roles = assign_roles(segs, 2, PHRASES)
    assert roles.roles == {0: "agent", 1: "customer"} and roles.confidence == 1.0


def test_phrases_from_both_speakers_lower_the_confidence() -> None:
    segs = [_seg(0, "您好，我的工号是1234，this call is recorded"), _seg(1, "hi, my name is Bob")]
    roles = assign_roles(segs, 2, PHRASES)
    assert roles.roles[0] == "agent" and roles.confidence == round(2 / 3, 3)


def test_neither_speaker_saying_agent_phrases_leaves_both_mixed() -> None:
    roles = assign_roles([_seg(0, "hello"), _seg(1, "hi there")], 2, PHRASES)
    assert roles.roles == {0: "mixed", 1: "mixed"} and roles.confidence == 0.0


def test_one_voice_is_the_agent_only_when_it_says_agent_phrases() -> None:
    assert assign_roles([_seg(0, "My name is Anna.")], 1, PHRASES).roles == {0: "agent"}
    assert assign_roles([_seg(0, "Hello, anyone there?")], 1, PHRASES).roles == {0: "mixed"}


def test_english_phrases_match_whole_words_only() -> None:
    assert assign_roles([_seg(0, "my names isn't it")], 1, ("my name is",)).roles == {0: "mixed"}
