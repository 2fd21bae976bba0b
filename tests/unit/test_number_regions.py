"""The plan of the engine's second, digit-biased decode: which stretches, and which text wins."""

from pipeline.asr.numbers import (
    accepted_text,
    around_number,
    cut_loop,
    extend_to_speech,
    invented_rest,
    loops,
    loops_on_digits,
    merge_number_texts,
    plan_number_regions,
    reads_as_number,
    repeats_itself,
    splice_number,
    worth_decoding,
    worth_digits_only,
)
from pipeline.asr.transcript import Segment
from pipeline.numbers.backstop import LONG_DIGIT_RUN


def seg(channel: int, start: float, end: float, text: str, language: str = "en") -> Segment:
    return Segment(
        role=("agent", "customer")[channel], channel=channel, start_s=start, end_s=end, text=text, language=language
    )


def test_a_number_read_in_pieces_is_one_region_with_padding() -> None:
    segments = [
        seg(0, 0.5, 3.0, "Good morning, this is Mark speaking."),
        seg(1, 13.2, 14.0, "My number is 3."),
        seg(1, 14.5, 15.0, "1."),
        seg(1, 15.6, 16.2, "Mirror 4."),
        seg(1, 16.8, 18.0, "1, 9, 8."),
        seg(0, 19.0, 21.0, "Let me check that for you."),
        seg(1, 22.0, 25.0, "I would like to unlock the cards and try my payment again."),
    ]
    [region] = plan_number_regions(segments, duration_s=30.0)
    assert (region.channel, region.segments, region.language) == (1, (1, 2, 3, 4), "en")
    assert (round(region.start_s, 2), round(region.end_s, 2)) == (12.9, 18.3)


def test_cues_open_regions_in_both_languages_and_ordinary_speech_does_not() -> None:
    segments = [
        seg(1, 1.0, 4.0, "My card number is 6264M and time 16364269."),
        seg(1, 20.0, 23.0, "我的手机号是188案,6420,276请,", "zh"),
        seg(0, 30.0, 32.0, "Let me check that for you."),
        seg(0, 40.0, 42.0, "这个产品不能保证收益。", "zh"),
    ]
    assert [r.segments for r in plan_number_regions(segments, 60.0)] == [(0,), (1,)]
    assert [r.segments for r in plan_number_regions(segments, 60.0, languages=("en",))] == [(0,)]


def test_a_long_pause_or_a_long_sentence_ends_a_region() -> None:
    segments = [
        seg(1, 1.0, 3.0, "My ID number is 3, 1, 0."),
        seg(1, 8.0, 9.0, "1, 4."),  # 5 s later: not joined; two digits alone open no region
        seg(1, 9.5, 13.0, "Can you spell your last name for me please?"),
    ]
    assert [r.segments for r in plan_number_regions(segments, 20.0)] == [(0,)]


def test_a_chinese_sentence_after_an_asked_number_does_not_join_its_region() -> None:
    # unspaced, a whole Chinese sentence used to count as one word, so "a few words" that may carry
    # on a number: the agent's question and two unrelated sentences were decoded again as one region
    segments = [
        seg(0, 1.0, 3.9, "请您提供一下您的手机号码。", "zh"),
        seg(0, 4.5, 7.0, "我的信用卡好像被盗刷了。", "zh"),
        seg(0, 7.5, 13.6, "请帮我冻结, 我想查询一下我上个月的话费账单。", "zh"),
        seg(1, 20.0, 22.0, "我的手机号是", "zh"),
        seg(1, 22.5, 23.0, "好的", "zh"),  # short: may still be part of the number
    ]
    assert [r.segments for r in plan_number_regions(segments, 30.0)] == [(0,), (3, 4)]


def test_regions_never_exceed_one_window() -> None:
    pieces = [seg(1, 2.0 * k, 2.0 * k + 1.5, f"{k % 10}, {k % 7}, {k % 3}, {k % 9}.") for k in range(30)]
    regions = plan_number_regions(pieces, 70.0)
    assert all(r.duration_s <= 28.0 for r in regions)
    assert sorted(i for r in regions for i in r.segments) == list(range(30))


def test_a_region_is_replaced_by_one_segment_and_the_rest_kept() -> None:
    segments = [seg(0, 0.0, 2.0, "Hello."), seg(1, 3.0, 4.0, "My number is 3."), seg(1, 4.5, 6.0, "1, nil, 1.")]
    [region] = plan_number_regions(segments, 10.0)
    merged = merge_number_texts(segments, [(region, "My number is 3, 1, 0, 1, 0, 4, 1, 9, 8, 6.")])
    assert [(s.start_s, s.end_s, s.text) for s in merged] == [
        (0.0, 2.0, "Hello."),
        (3.0, 6.0, "My number is 3, 1, 0, 1, 0, 4, 1, 9, 8, 6."),
    ]


def test_the_second_decode_wins_only_when_it_reads_as_a_longer_number() -> None:
    first = "My card number is 6264M and time 16364269."
    assert accepted_text("My card number is 6, 2, 6, 4, 7, 5, 1, 6, 3, 6, 5, 4, 6, 2, 9, 9.", first, 6.0)
    assert accepted_text("My card number is 6, 2, 6, 4.", first, 6.0) is None  # shorter
    assert accepted_text("I have not made your phone number 100,000.", "I have updated your phone number.", 4.0) is None
    assert accepted_text("4, 5, 3, 2, 0, 1, 5, 1", "4532 0151 1283 0366", 6.0) is None  # the first pass had more


def test_no_number_is_taken_that_the_audio_is_too_short_to_hold() -> None:
    # "订单尾号是四五一二" (the last four of an order number) in a 2.4 s region, prompted with digits
    read_on = "电单尾号是5, 5.1, 0, 0, 0, 4, 5, 6, 7, 8, 7, 8, 9, 9, 8, 10, 8, 10,"
    assert accepted_text(read_on, "定单尾号是四五一案。", 2.4) is None
    assert accepted_text(read_on, "定单尾号是四五一案。", 6.0) == read_on  # said slowly enough: taken
    # a first-pass number no one could say in its time gives way to the second decode's reading
    copied = "If this investment is 3-3-1-104-0-1-9-104-1-0-1-108-6-3-2."
    assert accepted_text("And the investment is 3.", copied, 2.5) == "And the investment is 3."
    assert accepted_text("", copied, 2.5) is None
    assert accepted_text("And the investment is 3.", copied, 6.0) is None  # time enough: kept


def test_a_repetition_loop_is_cut_at_the_sentence_before_it_or_dropped() -> None:
    said = "My ID number is 3, 2, 0, 1, 0, 2, 2, 0, 0, 2, 0, 1, 0, 8, 0, 1, 8 2."
    looped = said + " " + ", ".join("31415926535897932384626")  # runs on past any number's length
    assert accepted_text(looped, "My number is 3.", 10.0) == said
    assert accepted_text(said + " " + "1, 0, " * 40, "My number is 3.", 10.0) == said + " 1, 0"  # a loop kept once
    assert accepted_text("1, " * 60, "My number is 3.", 10.0) is None


def test_redaction_backstop_masks_card_length_runs_as_asr_writes_them() -> None:
    for text in (
        "6, 2, 6, 4, 7, 5, 1, 6, 3, 6, 5, 4",
        "6.2.6.4.7.5.1.6.3.6.5.4",
        "6264-7516-3654-6299",
        "626475163654",
    ):
        assert LONG_DIGIT_RUN.fullmatch(text), text
    for text in ("4, 5, 1, 2", "2024-03-15", "1,280.50", "12 28 123"):
        assert not LONG_DIGIT_RUN.search(text), text


def test_a_decoder_loop_is_cut_after_its_first_copy() -> None:
    assert cut_loop("My mobile number is 1, 5, 10, 8, 8, 8, 10, 10, 10, 10, 10, 10") == (
        "My mobile number is 1, 5, 10, 8, 8, 8, 10"
    )
    assert cut_loop("And the card is 6, 6, 6, 6, 6, 6") == "And the card is 6"
    assert cut_loop("1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2") == "1, 2"
    # a misheard digit repeated a few times is still a number, not a loop
    assert cut_loop("6, 2, 7, 9, 9, 9, 9, 9, 4, 6, 1, 9, 3, 7") == "6, 2, 7, 9, 9, 9, 9, 9, 4, 6, 1, 9, 3, 7"


def test_a_region_grows_to_the_speech_it_overlaps_within_one_window() -> None:
    [region] = plan_number_regions([seg(1, 15.8, 22.4, "My number is 3, 1, 0, 1, 0, 4, 1, 9, 8, 8.")], 60.0)
    grown = extend_to_speech(region, [(2.0, 5.0), (15.6, 27.9), (35.0, 40.0)], most_s=10.0)
    assert (grown.start_s, grown.end_s, grown.segments) == (15.5, 27.9, region.segments)
    capped = extend_to_speech(region, [(0.0, 60.0)], max_region_s=20.0, most_s=60.0)
    assert capped.end_s - capped.start_s == 20.0 and capped.start_s <= region.start_s


def test_a_region_grows_by_at_most_two_seconds_either_side() -> None:
    # a mono call's speech span can hold 25 s of both parties' turns
    [region] = plan_number_regions([seg(1, 15.8, 22.4, "My number is 3, 1, 0, 1, 0, 4, 1, 9, 8, 8.")], 60.0)
    grown = extend_to_speech(region, [(2.0, 40.0)])
    assert (round(grown.start_s, 2), round(grown.end_s, 2)) == (13.5, 24.7)


def test_a_long_segment_region_is_cut_to_the_stretch_around_its_number() -> None:
    said = "I can see a payment I do not know about. Could we go through it? The phone number on the account is 5, 9, 0, 4, 6, 9."
    segments = [
        seg(0, 0.0, 3.0, "How can I help?"),
        seg(1, 100.0, 124.0, said + " " + "And thank you so much for all your help today." * 2),
    ]
    [region] = plan_number_regions(segments, 200.0)
    cut = around_number(region, segments)
    per_char = 24.0 / len(segments[1].text)
    number_at = 100.0 + said.index("5, 9") * per_char
    number_end = 100.0 + (said.index("6, 9") + 4) * per_char
    assert cut.segments == region.segments and cut.language == region.language
    assert round(cut.start_s, 2) == round(number_at - 4.0, 2) and round(cut.end_s, 2) == round(number_end + 3.0, 2)
    assert cut.end_s - cut.start_s < 12.0 < region.end_s - region.start_s


def test_a_region_whose_number_fills_it_is_left_as_it_was() -> None:
    segments = [seg(1, 10.0, 14.0, "It is 3, 1, 0, 1, 0, 4, 1, 9.")]
    [region] = plan_number_regions(segments, 30.0)
    assert around_number(region, segments) == region


def test_a_decode_that_loops_or_runs_past_any_number_does_not_read_as_a_number() -> None:
    said = "My name is 3, 1, 0, 1, 0, 4, 1, 9, 8, 6, 7, 8, 0, 9, 2, 3, 0, 3."
    assert reads_as_number(said) and not loops(said)
    stuck = "My name is 3, 1, 0, 1, 0, 4, 1, 9, 8, 6, " + "6, " * 30
    assert loops(stuck) and not reads_as_number(stuck)
    twice = said + " " + said[11:]  # heard twice: 36 digits in a row
    assert loops(twice) and not reads_as_number(twice)
    assert not loops("My number is one, one, nero, three.") and not reads_as_number("My number is one, one, nero.")
    assert not reads_as_number("I paid 50 then 20.")  # loop-free but no long number
    # only a loop while writing digits is worth a decode at a temperature
    assert loops_on_digits(stuck) and loops_on_digits(twice)
    assert not loops_on_digits("我想查询一下我上个月的话费账单。" * 8)
    assert loops("我想查询一下我上个月的话费账单。" * 8)


def test_only_an_announced_number_that_reads_as_no_kind_is_decoded_again_with_digits_only() -> None:
    broken = "My mobile number is 1 time time 6, 0 time 1, 2 time 8, 0."
    assert worth_digits_only(broken, broken)
    # announced in the first pass only (the digit-prompted decode heard "my normal term")
    assert worth_digits_only(
        "My normal term, I am heaven, I am 1, 9, 2, 1, 0, heaven.", "My mobile number is 1k, 9192."
    )
    assert not worth_digits_only("My card number is 4, 5, 3, 2, 0, 1, 7, 8, 9, 6, 1, 2, 3, 4, 5, 6.", "")  # a card
    assert not worth_digits_only("My mobile number is 1, 3, 9, 0, 0, 2, 1, 4, 5, 6, 7.", "")  # a phone
    assert not worth_digits_only("My last bill was 240 dollars, the number is 7.", "")  # an amount
    assert not worth_digits_only("I am 1, 9, 2, 1, 0.", "I am 1, 9, 2.")  # no number announced
    assert not worth_digits_only("My mobile number is mirror time.", "")  # nothing begun


def test_the_second_decode_changes_only_the_digits_of_a_region() -> None:
    # prompted with digits, the second decode hears the words around a number worse: they stay the
    # first pass's, before and after the number, whatever the second decode wrote there
    assert (
        splice_number("My mobile number is 1x162.02396. I am...", "My total number is 1, 1, 6, 2, 0, 2, 3, 9, 6, 9.")
        == "My mobile number is 1, 1, 6, 2, 0, 2, 3, 9, 6, 9. I am..."
    )
    assert (
        splice_number("我的卡号是4528 351分,4287,676,谢谢。", "我的卡后为号是4, 5, 2, 8, 3, 5, 1, 4。")
        == "我的卡号是4, 5, 2, 8, 3, 5, 1, 4,谢谢。"
    )
    # a spoken digit word starts (or ends) the number too: nothing is said twice
    assert (
        splice_number("My mobile number is one, nine, 9192.", "My normal term is 1, 9, 2, 1, 0, 1, 0, 7.")
        == "My mobile number is 1, 9, 2, 1, 0, 1, 0, 7."
    )
    assert splice_number("My number is three, two, nero", "My number is 3, 2, 0, 1") == "My number is 3, 2, 0, 1, nero"
    # no digit in the first pass: nothing to mend, and nothing written into it
    assert splice_number("May I have your mobile number?", "May I have your mobile number? 1, 3, 9, 0") == (
        "May I have your mobile number?"
    )


def test_only_regions_with_a_number_still_to_mend_are_decoded_again() -> None:
    assert worth_decoding("My card number is 4528 351, 4287, 676")  # fails Luhn: worth mending
    assert worth_decoding("My mobile number is one three nine")  # spoken digit words count
    assert not worth_decoding("May I have your card number, please?")  # a cue only: nothing said yet
    assert not worth_decoding("请您提供一下您的手机号码。")
    assert not worth_decoding("It was delivered on 12 March 2024 at 3 45.")  # digits, but no number given
    assert not worth_decoding("The total is 48 pounds 20.")
    # a number that passes its checksum is right already: a perfect first pass stays perfect
    assert not worth_decoding("My card number is 4532 0151 1283 0366.")
    assert not worth_decoding("我的身份证号是11010519491231002X")
    # a number's last four digits read as four digits: whole already, and no identifier
    assert not worth_decoding("请核对一下您身份证号码的后四位。 我的卡尾号是3759。")
    assert not worth_decoding("我的卡尾号是三七五九。")
    assert not worth_decoding("The card ending 4 2 1 2.")
    # 尾号 as the first pass hears it (委号, 为号, 位号): still a tail
    assert not worth_decoding("我的塔后委号是3759。")
    assert not worth_decoding("好的,已经为您办理了临时挂师,我的卡号为号是3759。")
    assert worth_decoding("我的卡号为号是13759")  # five digits: no tail, worth mending
    assert worth_decoding("我的卡尾号是375")  # a digit short: worth mending
    assert worth_decoding("The card ending 8 4212 03")  # more than a tail: a whole number
    assert worth_decoding("My card number is 4212 at the end of the month")  # 'end' is not a tail cue


def test_a_second_decode_that_reads_part_of_its_region_twice_is_not_taken() -> None:
    old = "I am calling about my real, it's 1015 euros and that looks too high. The phone number on the accountant's."
    new = (
        "I am calling about my real, it's 10, 115, your own, and that looks too high. The phone is 1, 0, 1, 0, "
        "2, 1, 7, 4, 5, 6, 7, 8, 0 euros and that looks too high."
    )
    assert repeats_itself(new, old)
    assert not repeats_itself("My card number is 4, 5, 3, 2, 0, 1, 5, 1.", "My card number is 4532 0151.")
    assert not repeats_itself("卡号是4, 5, 2, 8, 3, 5, 1, 4。", "我的卡号是4528 351分,4287")
    assert repeats_itself("我的卡号是4528,我的卡号是4528", "我的卡号是4528")
    # a number is the stretch with the most digits: far-apart digits are not one number
    assert splice_number("it's 1015 euros, and my number is near oh", "it's 1, 0, 1, 5, 2, 2 euros") == (
        "it's 1, 0, 1, 5, 2, 2 euros, and my number is near oh"
    )


def test_a_rest_that_loops_or_reads_digits_faster_than_speech_is_the_prompt_not_the_audio() -> None:
    # the last 1.2 s of a region after the model ended early, prompted with digits
    assert invented_rest("The ID is 1, 0, 0, 0, 0, 0, 0", 1.2)  # a loop
    assert invented_rest("The card is 6, 5, 4, 5, 6, 7, 8, 0, 1, 8. And the phone", 1.1)  # 10 digits in 1.1 s
    # the rest of a number read slowly is speech: kept
    assert not invented_rest("7, 9, 4, 2.", 1.2)
    assert not invented_rest("The engineer can confirm on the fifth of March.", 3.0)
    assert not invented_rest("尾号是4, 5, 1, 2。", 2.0)
