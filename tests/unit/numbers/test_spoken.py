"""Spoken long numbers as ASR writes them: parsing, the cue-taken last resort, and what stays out."""

import pytest

from pipeline.numbers.normalize import normalize
from pipeline.numbers.pii import CUED_CONFIDENCE, LIKELY_CONFIDENCE, find_pii, redact_texts
from pipeline.numbers.spoken import (
    announces_number,
    continues_number,
    cue_type,
    cued_type,
    longest_digit_run,
    names_amount,
    says_number,
)
from tests.unit.qa.helpers import VALID_ID, VISA_CARD, seg, spoken_en


def detect(*segments):
    hits = find_pii(segments, [normalize(s.text) for s in segments])
    return hits, redact_texts(segments, hits)


@pytest.mark.parametrize(
    ("spoken", "digits"),
    [
        ("four five double five three", "45553"),
        ("triple seven one two", "777 12".replace(" ", "")),
        ("one oh two four", "1024"),
        ("nine nil nil one", "9001"),
        ("six nought four two", "6042"),
        ("幺三八一二三四", "1381234"),
        ("两零二四零一", "202401"),
        ("手机号幺三八", "138"),
    ],
)
def test_spoken_digits_become_digits(spoken, digits):
    assert "".join(ch for ch in normalize(spoken).text if ch.isdigit()) == digits


def test_single_digit_words_in_ordinary_speech_stay_words():
    assert normalize("no one said oh well").text == "no one said oh well"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("my card number is", "bank_card"),
        ("the id on it is", "cn_resident_id"),
        ("call my mobile", "phone"),
        ("我的卡号是", "bank_card"),
        ("身份证号码", "cn_resident_id"),
        ("手机号是", "phone"),
        ("my social security number is", "us_ssn"),
        ("the ssn on file", "us_ssn"),
        ("my account number is", "account_number"),
        ("我的账户是", "account_number"),
        ("the account on my debit card", "bank_card"),  # the last cue wins
        ("the amount is", None),
        ("cardigan sizes are", None),  # a cue is a whole word
    ],
)
def test_cue_words_name_a_kind(text, kind):
    assert cue_type(normalize(text).text) == kind


def test_a_run_is_taken_on_its_cue_only_with_card_like_length_and_no_unit():
    assert cued_type("my card number is ", "6264791636") == "bank_card"
    assert cued_type("my card number is ", "62647916") is None  # 8 digits: too short to be sure
    assert cued_type("my card number is ", "6" * 12) is None  # one digit repeated: a loop
    assert cued_type("the card payment was ", "1250000000", " dollars") is None
    assert cued_type("card fee $", "1250000000") is None
    assert cued_type("i called on ", "2024031510") is None  # no cue
    assert cued_type("my mobile is " + "x" * 40, "157478857") is None  # cue too far back


def test_numbers_without_a_check_have_their_own_lengths_after_a_cue():
    assert cued_type("my social is ", "52345678") == "us_ssn"  # a digit lost
    assert cued_type("my social is ", "5234567890") == "us_ssn"
    assert cued_type("my social is ", "52345678901") is None  # no social security number is that long
    assert cued_type("my account number is ", "44710093") == "account_number"  # 8 digits, as in the UK
    assert cued_type("my account number is ", "4471009") is None
    assert cued_type("my account is overdrawn by ", "12500000", " dollars") is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # 11 of 16 digits survived: no checksum and no card shape, but said after "card number"
        ("My card number is 4, 0, 9, 1, 0, 4, 4, 1, 0, 1, 1.", "bank_card"),
        ("My mobile number is 1, 5, 7, 4, 7, 8, 8, 5, 7.", "phone"),  # two digits lost
        ("My ID number is 3, 2, 0, 1, 0, 2, 1, 9, 6, 0, 1, 1.", "cn_resident_id"),
        ("我的手机号是幺八二，六四二零，二七", "phone"),
    ],
)
def test_a_damaged_number_after_its_cue_is_taken_with_low_confidence_and_masked(text, kind):
    hits, redacted = detect(seg("customer", 0, 8, text))
    assert [(h.type, h.confidence) for h in hits] == [(kind, CUED_CONFIDENCE)]
    assert not any(ch.isdigit() for ch in redacted[0]), redacted[0]


def test_checks_and_shapes_win_over_the_cue():
    hits, _ = detect(seg("customer", 0, 8, f"my phone is {spoken_en(VISA_CARD)}"))
    assert [(h.type, h.confidence) for h in hits] == [("bank_card", 1.0)]
    hits, _ = detect(seg("customer", 0, 8, f"my card number is {VALID_ID}"))
    assert [(h.type, h.confidence) for h in hits] == [("cn_resident_id", 1.0)]
    hits, _ = detect(seg("customer", 0, 8, f"my phone number is {spoken_en(VISA_CARD[:15])}"))  # a digit lost
    assert [(h.type, h.confidence) for h in hits] == [("bank_card", LIKELY_CONFIDENCE)]


@pytest.mark.parametrize(
    "text",
    [
        "The order number is four five one two.",
        "My last bill was two hundred and forty dollars.",
        "My card payment of 1,250,000,000 dollars went through.",
        "I called your phone line on 2024 03 15 at 10 30.",
        "The card expires on 12 28, the code is 123.",
        "订单尾号是四五一二。",
        "我这个月的账单是一千二百八十元。",
        "我的卡上个月刷了一二三四五六七八九元",
        "my account balance is 12,345,678",
        "my card limit is 123,456,789",  # an amount word between the cue and the number
        "我的账户余额是一二三四五六七八九",
    ],
)
def test_amounts_dates_and_short_numbers_are_not_taken(text):
    hits, _ = detect(seg("customer", 0, 8, text))
    assert hits == []


def test_digit_runs_and_number_regions():
    assert longest_digit_run("My number is 3, 2, nero, 1, 9, 6 and then 4 5") == 3
    assert longest_digit_run("My ID number is 3, 2, 0, 1, 0, 2, 2, 0, 0, 2, 0, 1, 0, 8, 0, 1, 8 2.") == 18
    assert says_number("My card number is 6264M and time 16364269.")
    assert says_number("My name is 101, 101, 196, I'm 9423")  # digits, no cue
    assert says_number("我的身份证号是")
    assert not says_number("Let me check that for you.")
    assert not says_number("I am sorry to hear that, let me pull up your account.")  # mentioned, not read
    assert not says_number("Please keep your phone nearby in case the driver needs to call you.")
    assert continues_number("Mirror 4.") and continues_number("I am 441.")
    assert not continues_number("Can you spell your last name for me please?")
    assert continues_number("好的") and continues_number("幺三九")
    assert not continues_number("我的信用卡好像被盗刷了。")  # each character counts as a word


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("My last bill was 200,000,000, 40,000.", True),  # thousands: an amount, however misheard
        ("My last bill was $240.", True),
        ("I paid 1 250 dollars", True),
        ("我这个月的账单是1280元", True),
        ("The delivery is on the 3 at 5 pm", True),
        ("My mobile number is 1 time, 0, 8, 6, 8", False),
        ("The card is 4, 5, 3, 2, 0, 1, 7", False),
        ("卡号是518i,929", False),
    ],
)
def test_amounts_are_told_from_numbers_being_read(text, amount):
    assert names_amount(text) is amount


def test_a_number_is_announced_by_a_number_word_or_a_cue():
    assert announces_number("My name is Paul, or my number 3")
    assert announces_number("My mobile is 1 time, 0")
    assert announces_number("我的身份证是")
    assert not announces_number("My last bill was 240")
    assert not announces_number("I will call you back at 5")
