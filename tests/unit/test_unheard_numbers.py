"""Numbers said but not heard as digits (pipeline.numbers.unheard): masked where they are known to be."""

from __future__ import annotations

from pipeline.events import ModelInfo, ObjectRef, Segment, Transcript
from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import normalize
from pipeline.numbers.pii import find_pii
from pipeline.numbers.unheard import unheard_ranges
from pipeline.qa import QAEngine
from pipeline.stages.redaction import redact_transcript


def masked(*turns: tuple[str, int, float, float, str]) -> dict[int, list[str]]:
    """(role, channel, start, end, text) per segment -> the texts of what is masked, per segment."""
    segments = [SegmentText(*turn) for turn in turns]
    norms = [normalize(s.text) for s in segments]
    ranges = unheard_ranges(segments, norms, find_pii(segments, norms))
    return {i: [segments[i].text[a:b] for a, b in r] for i, r in ranges.items()}


def test_an_announced_card_heard_as_words_is_masked_to_the_end_of_the_turn() -> None:
    # 8 kHz u-law, "three" as "free", "zero" as "ammon": the detector sees four digits in 16
    assert masked(
        ("customer", 1, 28.1, 33.3, "A long number on a card is for big free."),
        ("customer", 1, 33.3, 36.6, "Ammon, ammon, big, ammon, I am free."),
        ("customer", 1, 36.6, 40.4, "Eight, ammon, ammon, I am nine, four, eight."),
        ("agent", 0, 41.3, 45.0, "Your balance today is 164 pounds."),
    ) == {0: ["for big free"], 1: ["Ammon, ammon, big, ammon, I am free"], 2: ["Eight, ammon, ammon, I am nine, four, eight"]}


def test_the_words_between_the_announcement_and_the_number_found_are_masked_and_nothing_after_it() -> None:
    assert masked(
        ("customer", 1, 37.9, 47.3, "Sure, my card number is I'm 4 5 3 2 0 1 5 1 1 2 8 3 0 3 6 6, thanks."),
    ) == {0: ["I'm"]}
    assert masked(("customer", 1, 0.0, 5.0, "My card number is 4532 0151 1283 0366.")) == {}


def test_an_announcement_with_no_digit_heard_an_amount_or_a_tail_masks_nothing() -> None:
    assert masked(("customer", 1, 0.0, 4.0, "My phone number is the same as before.")) == {}
    assert masked(("customer", 1, 0.0, 4.0, "My card limit is 5000 dollars.")) == {}
    assert masked(("customer", 1, 0.0, 4.0, "My card was declined for $182.")) == {}
    assert masked(("customer", 1, 0.0, 4.0, "我的卡号尾号是三七五九。")) == {}  # a tail names no one
    # 尾号 as the first pass hears it; the 为 of 为号 is no copula ("is")
    assert masked(("customer", 1, 0.0, 4.0, "我的卡号为号是3759。")) == {}
    assert masked(("customer", 1, 0.0, 4.0, "我的卡号为幺三七五九二八")) == {0: ["幺三七五九二八"]}


def test_the_answer_to_a_question_for_the_security_code_is_masked_whatever_was_heard() -> None:
    assert masked(
        ("agent", 0, 0.3, 4.1, "Thank you, and the security code on the back?"),
        ("customer", 1, 5.0, 8.0, "A code is free, I am free."),
    ) == {1: ["free, I am free"]}
    assert masked(  # no "is": the whole answer
        ("agent", 0, 0.3, 4.1, "Thank you, and the security code on the back?"),
        ("customer", 1, 5.0, 8.0, "If you are with it code in for one eight."),
    ) == {1: ["If you are with it code in for one eight"]}
    # from the answer's own cue: "The security code is" stays
    assert masked(
        ("agent", 0, 0.3, 4.1, "And the CVV please."),
        ("customer", 1, 5.0, 8.0, "The security code is Evan, I'm."),
    ) == {1: ["Evan, I'm"]}


def test_a_partys_own_next_turn_or_a_long_answer_after_the_question_keeps_its_words() -> None:
    assert masked(
        ("agent", 0, 0.3, 4.1, "I will never ask for your PIN."),
        ("agent", 0, 4.5, 8.0, "This call may be recorded for quality purposes."),
    ) == {}
    assert masked(
        ("agent", 0, 0.3, 4.1, "And the security code on the back?"),
        ("customer", 1, 5.0, 12.0, "Sorry I do not have the card with me right now, can I call you back later?"),
    ) == {}


def test_redaction_masks_the_text_and_gives_an_unclassified_span_qa_does_not_judge() -> None:
    segments = [
        Segment(role="agent", channel=0, start_s=0.3, end_s=4.1, text="Thank you, and the security code on the back?"),
        Segment(role="customer", channel=1, start_s=5.0, end_s=8.0, text="A code is free, I am free."),
    ]
    raw = Transcript(call_id="c", object=ObjectRef(bucket="b", key="c.wav"), duration_s=10.0, channels=2,
                     segments=segments, model=ModelInfo(name="m", version="1"))  # fmt: skip
    t = redact_transcript(raw)
    assert [s.text for s in t.segments] == [segments[0].text, "A code is [NUMBER]."]
    assert [(p.type, p.role, p.start_s, p.end_s) for p in t.pii] == [("unclassified_number", "customer", 5.0, 8.0)]
    result = QAEngine.from_paths().evaluate(t)
    assert not [f for f in result.findings if f.rule_id.startswith("pii.")]
    assert [s.text for s in result.redacted_segments] == [segments[0].text, "A code is [NUMBER]."]


def test_an_announcement_is_read_within_its_clause() -> None:
    # normalising drops the 。 between the question for a mobile and "the account is fine": no announcement
    assert masked(
        ("mixed", 0, 0.0, 6.0, "请您提供一下您的手机号码。系统显示您的账户目前是正常的。"),
        ("mixed", 0, 6.5, 12.0, "一三八零零一三八零零零"),
    ) == {}
    assert masked(("customer", 1, 0.0, 4.0, "Your card number? It is 4532.")) == {}


def test_an_answer_to_a_question_that_speaks_of_a_secret_without_asking_for_it_keeps_its_words() -> None:
    for question in ("您好，请问您是要办理密码重置吗？", "请问您是忘记密码了吗", "请您先输入交易密码",
                     "请问您还记得查询密码吗", "Did you forget your PIN?", "Would you like to reset your PIN?"):
        assert masked(("agent", 0, 0.3, 4.1, question), ("customer", 1, 5.0, 7.0, "对，我忘了。")) == {}, question
    # asked for, it is masked as before
    assert masked(("agent", 0, 0.3, 4.1, "请问卡背面的安全码是多少？"), ("customer", 1, 5.0, 7.0, "稍等，我看一下。")) == {
        1: ["稍等，我看一下"]
    }


def test_is_it_safe_is_no_security_code() -> None:
    # 安全吗 ("is it safe?") sounds as 安全码 does, toneless: a particle is no misheard character
    assert masked(("agent", 0, 0.3, 4.1, "您觉得这样操作安全吗？"), ("customer", 1, 5.0, 7.0, "应该没问题吧。")) == {}
    assert masked(("agent", 0, 0.3, 4.1, "请问卡背面的安全马是多少？"), ("customer", 1, 5.0, 7.0, "嗯，稍等。")) == {1: ["嗯，稍等"]}
