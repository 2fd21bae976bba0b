"""Word times through PII redaction: a PII word's text is its label, the hit carries the words' times."""

from __future__ import annotations

from pipeline.events import ModelInfo, ObjectRef, Segment, Transcript, Word
from pipeline.stages.redaction import redact_transcript
from pipeline.stages.word_spans import covered_words, word_ranges


def words_of(text: str, start_s: float, step_s: float) -> list[Word]:
    return [
        Word(start_s=start_s + i * step_s, end_s=start_s + (i + 1) * step_s - 0.05, text=w)
        for i, w in enumerate(text.split())
    ]


def call(text: str, start_s: float = 2.0, step_s: float = 0.5) -> Transcript:
    words = words_of(text, start_s, step_s)
    seg = Segment(role="customer", channel=1, start_s=start_s, end_s=words[-1].end_s, text=text, words=words)
    return Transcript(
        call_id="c",
        object=ObjectRef(bucket="b", key="c.wav"),
        duration_s=60.0,
        channels=2,
        segments=[seg],
        model=ModelInfo(name="m", version="1"),
    )


def test_card_words_carry_labels_and_the_hit_their_times() -> None:
    t = redact_transcript(call("sure my card is 4532 0151 1283 0366 thanks"))
    words = t.segments[0].words
    assert words is not None
    assert [w.text for w in words] == ["sure", "my", "card", "is", "[CARD]", "[CARD]", "[CARD]", "[CARD]", "thanks"]
    assert not any(ch.isdigit() for w in words for ch in w.text)
    (hit,) = t.pii
    # words 4-7 at 0.5 s steps from 2.0 (4.0-5.95), and the pauses around them up to the next words
    assert hit.word_timed and hit.start_s == 3.95 and hit.end_s == 6.0


def test_a_span_reaches_into_the_pauses_around_its_words_at_most_a_second() -> None:
    # a digit the first pass did not write, or a word end that came out early, lies in that pause
    text = "my card is 4532 0151 1283 0366"
    words = [
        Word(start_s=a, end_s=b, text=w)
        for (a, b), w in zip(
            [(0.0, 0.2), (0.3, 0.6), (0.7, 0.8), (3.0, 3.4), (3.5, 3.9), (4.0, 4.4), (4.5, 4.9)], text.split()
        )
    ]
    seg = Segment(role="customer", channel=1, start_s=0.0, end_s=5.3, text=text, words=words)
    t = redact_transcript(call("x").model_copy(update={"segments": [seg]}))
    assert (t.pii[0].start_s, t.pii[0].end_s) == (2.0, 5.9)  # a second either side: nothing said there
    # the channel's next segment bounds it (not its own segment's end: the model's guess), the other
    # channel's does not
    later = Segment(role="customer", channel=1, start_s=5.6, end_s=7.0, text="thanks")
    other = Segment(role="agent", channel=0, start_s=5.0, end_s=6.0, text="okay")
    t = redact_transcript(call("x").model_copy(update={"segments": [seg, other, later]}))
    assert (t.pii[0].start_s, t.pii[0].end_s) == (2.0, 5.6)


def test_a_backstopped_segment_masks_every_digit_word() -> None:
    t = redact_transcript(call("ref 123456789012345 ok"))
    words = t.segments[0].words
    assert words is not None and not any(ch.isdigit() for w in words for ch in w.text)


def test_segments_without_words_keep_segment_times() -> None:
    seg = Segment(role="customer", channel=1, start_s=1.0, end_s=5.0, text="my card is 4532 0151 1283 0366")
    t = redact_transcript(
        Transcript(
            call_id="c",
            object=ObjectRef(bucket="b", key="c.wav"),
            duration_s=9.0,
            channels=2,
            segments=[seg],
            model=ModelInfo(name="m", version="1"),
        )
    )
    assert t.segments[0].words is None and not t.pii[0].word_timed and t.pii[0].start_s == 1.0


def test_word_ranges_follow_the_text_in_order() -> None:
    words = [(0.0, 0.1, "is"), (0.1, 0.2, "4532,"), (0.2, 0.3, "is")]
    assert word_ranges("it is 4532, is", words) == [(3, 5), (6, 11), (12, 14)]
    assert covered_words("it is 4532, is", words, [(6, 10)]) == [1]
    assert covered_words("x", [(0.0, 0.1, "99")], []) == [0]  # not found and a digit: fail closed


def test_a_digit_heard_as_a_word_at_the_numbers_edge_is_cut_with_it() -> None:
    # "four" at the start written "for": the text keeps it (a homophone is a digit only between
    # digits), the audio cut takes its word too; "thanks" after the number is left alone
    text = "my card is for 5320 1511 2830 366, thanks"
    words = [
        Word(start_s=a, end_s=b, text=w)
        for (a, b), w in zip(
            [
                (0.0, 0.2),
                (0.3, 0.6),
                (0.7, 0.8),
                (0.9, 1.2),
                (1.3, 2.0),
                (2.1, 2.8),
                (2.9, 3.6),
                (3.7, 4.2),
                (4.3, 4.8),
            ],
            text.split(),
        )
    ]
    seg = Segment(role="customer", channel=1, start_s=0.0, end_s=4.8, text=text, words=words)
    t = redact_transcript(call("x").model_copy(update={"segments": [seg]}))
    assert [(p.type, p.start_s, p.end_s) for p in t.pii] == [("bank_card", 0.8, 4.3)]


def test_a_last_digit_written_as_a_name_or_glued_to_letters_is_cut_with_the_number() -> None:
    # 8 kHz u-law: a card's last "zero" came out "Neuro", an account's last "eight" "8mph"
    for last in ("Neuro.", "8mph."):
        text = f"my card is 5320 1511 2830 366 {last} thanks"
        times = [(0.0, 0.2), (0.3, 0.6), (0.7, 0.8), (1.3, 2.0), (2.1, 2.8), (2.9, 3.6), (3.7, 4.2), (4.3, 4.8),
                 (5.6, 6.0)]
        words = [Word(start_s=a, end_s=b, text=w) for (a, b), w in zip(times, text.split(), strict=True)]
        seg = Segment(role="customer", channel=1, start_s=0.0, end_s=6.0, text=text, words=words)
        t = redact_transcript(call("x").model_copy(update={"segments": [seg]}))
        assert [(p.type, p.start_s, p.end_s) for p in t.pii] == [("bank_card", 0.8, 5.6)], last


def test_what_the_backstop_masks_is_a_span_audio_redaction_cuts() -> None:
    # twelve digits no detector takes: the text says [NUMBER], so the copy must cut its audio too
    t = redact_transcript(call("ref 123456789012 ok"))
    # its word (2.5-2.95 s) and the pauses either side, to the words around it
    assert [(p.type, p.role, p.start_s, p.end_s, p.word_timed) for p in t.pii] == [
        ("unclassified_number", "customer", 2.45, 3.0, True)
    ]
    seg = Segment(role="customer", channel=1, start_s=1.0, end_s=4.0, text="ref 123456789012 ok")
    untimed = redact_transcript(call("x").model_copy(update={"segments": [seg]}))
    assert [(p.start_s, p.end_s, p.word_timed) for p in untimed.pii] == [(1.0, 4.0, False)]
