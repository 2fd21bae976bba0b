"""Spoken long numbers in ASR text: where one is being said, and what a cue says it is.

Two uses, both pure (no torch):

- :func:`says_number` picks the first-pass segments worth a second, digit-biased decode
  (:mod:`pipeline.asr.numbers`): a word announcing a number ("card number", 卡号, 手机号)
  or a run of digits / digit words, however badly the first pass wrote them.
- :func:`cued_type` is the last, checksum-free chance of the PII detector: a run of 9-20
  digits right after a cue naming the kind ("my card number is ...") is that kind, even
  when ASR dropped or doubled digits so that neither checksum nor shape fits. Amounts,
  dates and times are not runs after such a cue, and a run followed by a currency or
  unit word is never taken.

The text given is :func:`pipeline.qa.normalize.normalize` output (lower case, spoken digits
already digits, punctuation as spaces), so "double five", "oh", 幺 and 两 are handled there.
"""

from __future__ import annotations

import re

from pipeline.qa.model import PIIType
from pipeline.qa.normalize import normalize

MIN_CUED_DIGITS = 9  # an 11-digit mobile with two digits lost; longer than any amount said digit by digit
MAX_CUED_DIGITS = 20
CUE_WITHIN_CHARS = 24  # "my card number is" / "卡号是" / "the long number on my card is"
MIN_DIGITS_TO_REDECODE = 4  # digits (or digit words) in a segment that make it a number region
MAX_CONTINUING_WORDS = 3  # a digit-free segment this short may still carry on a number

# cue -> the PII type a number after it is. English on word boundaries; Chinese as substrings.
_EN_CUES: tuple[tuple[re.Pattern[str], PIIType], ...] = (
    (re.compile(r"\b(?:card|debit|credit|visa|mastercard)\b"), "bank_card"),
    (re.compile(r"\b(?:id|identity|identification|passport|resident)\b"), "cn_resident_id"),
    (re.compile(r"\b(?:phone|mobile|cell|cellphone|telephone|contact number)\b"), "phone"),
)
_ZH_CUES: tuple[tuple[re.Pattern[str], PIIType], ...] = (
    (re.compile(r"卡号|银行卡|信用卡|借记卡|储蓄卡"), "bank_card"),
    (re.compile(r"身份证|证件号"), "cn_resident_id"),
    (re.compile(r"手机|电话|联系方式"), "phone"),
)
# words that only open a number region (which kind is unknown): worth a second decode, never a type
_EN_NUMBER_WORDS = re.compile(r"\b(?:number|digits|ssn|social security)\b")
_ZH_NUMBER_WORDS = re.compile(r"号码|账号|尾号|卡号|号是|身份证号|手机号")
# a number followed by one of these is an amount, a quantity or a time, not an identifier
_UNIT_AFTER = re.compile(
    r"^\s*(?:dollars?|cents?|euros?|pounds?|yuan|rmb|usd|percent|per cent|%|minutes?|hours?|days?|"
    r"years?|months?|weeks?|times|am|pm|o'clock|元|块|毛|角|分钟|小时|天|年|月|号|日|点|岁|次|个|%)"
)
_AMOUNT_BEFORE = re.compile(r"(?:\$|¥|￥|€|£|usd|rmb)\s*$")
DIGIT_RUN = re.compile(r"[0-9]+(?: [0-9]+)*")
_THOUSANDS = re.compile(r"(?<![0-9.,])[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])")  # "200,000": how ASR writes an amount
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+")  # a CJK character, or a run of other word characters


def cue_type(text: str) -> PIIType | None:
    """The PII type a cue in ``text`` (normalised) names, the last cue in it winning."""
    best: tuple[int, PIIType] | None = None
    for pattern, kind in (*_EN_CUES, *_ZH_CUES):
        for m in pattern.finditer(text):
            if best is None or m.start() > best[0]:
                best = (m.start(), kind)
    return best[1] if best else None


def cued_type(before: str, digits: str, after: str = "") -> PIIType | None:
    """The type of the digit run ``digits`` taken on its cue alone: 9-20 digits, a cue in the
    ``CUE_WITHIN_CHARS`` characters before it, no currency sign before and no unit after it.
    ``before`` and ``after`` are the normalised text around the run."""
    if not MIN_CUED_DIGITS <= len(digits) <= MAX_CUED_DIGITS or len(set(digits)) < 3:
        return None
    if _UNIT_AFTER.match(after) or _AMOUNT_BEFORE.search(before):
        return None
    return cue_type(before[-CUE_WITHIN_CHARS:])


def digit_count(text: str) -> int:
    """Digits in ``text`` after normalisation (spoken digit words counted as digits)."""
    return sum(ch.isdigit() for ch in normalize(text).text)


def longest_digit_run(text: str) -> int:
    """Digits in the longest run of digit groups (separated by single spaces) of normalised text."""
    return max((sum(ch.isdigit() for ch in m.group()) for m in DIGIT_RUN.finditer(normalize(text).text)), default=0)


def says_number(text: str) -> bool:
    """Does this segment's text look like part of a long number being said: a word that
    announces one ("number", 号码, 卡号), or at least ``MIN_DIGITS_TO_REDECODE`` digits or digit
    words? A card or phone merely mentioned ("let me pull up your account", "keep your phone
    nearby") is not: 9 of the engine benchmark's 48 English sentences name one, and decoding each
    again cost CPU for nothing."""
    norm = normalize(text).text
    if sum(ch.isdigit() for ch in norm) >= MIN_DIGITS_TO_REDECODE:
        return True
    return bool(_EN_NUMBER_WORDS.search(norm) or _ZH_NUMBER_WORDS.search(norm))


def announces_number(text: str) -> bool:
    """Does this text name a number being given: a word for a number ("number", 号码) or a cue
    naming its kind ("card", "mobile", 身份证)?"""
    norm = normalize(text).text
    return bool(_EN_NUMBER_WORDS.search(norm) or _ZH_NUMBER_WORDS.search(norm) or cue_type(norm))


def names_amount(text: str) -> bool:
    """Does this text say an amount, a quantity or a time: a number written in thousands
    ("200,000"), after a currency sign, or before a unit word ("240 dollars", 1280元)?"""
    if _THOUSANDS.search(text):
        return True
    norm = normalize(text).text
    return any(
        _UNIT_AFTER.match(norm[m.end() :]) or _AMOUNT_BEFORE.search(norm[: m.start()]) for m in DIGIT_RUN.finditer(norm)
    )


def continues_number(text: str) -> bool:
    """Could this segment carry on a number the previous one started: it holds a digit, or it is
    a few words at most (ASR splits a slowly read number into short pieces: "1.", "Mirror 4.").
    Each Chinese character counts as a word: unspaced, a whole sentence ("我的信用卡好像被盗刷了")
    would otherwise be one, and join the number region of the agent's question before it."""
    norm = normalize(text).text
    return any(ch.isdigit() for ch in norm) or len(_WORD.findall(norm)) <= MAX_CONTINUING_WORDS
