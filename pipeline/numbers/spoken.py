"""Spoken long numbers in ASR text: where one is being said, and what a cue says it is.

Two uses, both pure (no torch):

- :func:`says_number` picks the first-pass segments worth a second, digit-biased decode
  (:mod:`pipeline.asr.numbers`): a word announcing a number ("card number", 卡号, 手机号)
  or a run of digits / digit words, however badly the first pass wrote them.
- :func:`cued_type` is the last, checksum-free chance of the PII detector: a run of 9-20
  digits right after a cue naming the kind ("my card number is ...") is that kind, even
  when ASR dropped or doubled digits so that neither checksum nor shape fits. Social security
  and bank account numbers, which have no checksum, are found this way only (a social
  security number also by its written 3-2-4 shape, :mod:`pipeline.numbers.pii`). Amounts,
  dates and times are not runs after such a cue, and a run followed by a currency or
  unit word is never taken.

The text given is :func:`pipeline.numbers.normalize.normalize` output (lower case, spoken digits
already digits, punctuation as spaces), so "double five", "oh", 幺 and 两 are handled there.
"""

from __future__ import annotations

import bisect
import re

from pipeline.numbers.model import PIIType
from pipeline.numbers.normalize import Normalized, is_cjk, normalize
from pipeline.numbers.sound import SoundPhrase

MIN_CUED_DIGITS = 9  # an 11-digit mobile with two digits lost; longer than any amount said digit by digit
MAX_CUED_DIGITS = 20
# kinds whose numbers are not that long: a US social security number (9 digits, one dropped or
# doubled), a bank account (8 digits in the UK, 8-17 in the US), a card's security code (3-4) or PIN (4-6)
CUED_DIGITS: dict[PIIType, tuple[int, int]] = {
    "us_ssn": (8, 10),
    "account_number": (8, MAX_CUED_DIGITS),
    "card_secret": (3, 6),
}
MIN_LOOP_DIGITS = 8  # a run this long of two digits or fewer is a repetition loop ("0000 0000"), not a number
CUE_WITHIN_CHARS = 24  # "my card number is" / "卡号是" / "the long number on my card is"
MIN_DIGITS_TO_REDECODE = 4  # digits (or digit words) in a segment that make it a number region
MAX_CONTINUING_WORDS = 3  # a digit-free segment this short may still carry on a number

# cue -> the PII type a number after it is. English on word boundaries; Chinese as substrings.
_EN_CUES: tuple[tuple[re.Pattern[str], PIIType], ...] = (
    (re.compile(r"\b(?:card|debit|credit|visa|mastercard)\b"), "bank_card"),
    (re.compile(r"\b(?:id|identity|identification|passport|resident)\b"), "cn_resident_id"),
    (re.compile(r"\b(?:phone|mobile|cell|cellphone|telephone|contact number)\b"), "phone"),
)
_ZH_CUE_WORDS: dict[PIIType, tuple[str, ...]] = {
    "bank_card": ("卡号", "银行卡", "信用卡", "借记卡", "储蓄卡"),
    "cn_resident_id": ("身份证", "证件号"),
    "phone": ("手机", "电话", "联系方式"),
}
_ZH_UNCHECKED_CUE_WORDS: dict[PIIType, tuple[str, ...]] = {
    "account_number": ("账号", "账户", "户号"),
    "card_secret": ("安全码", "校验码", "密码"),
}
_ZH_CUES: tuple[tuple[re.Pattern[str], PIIType], ...] = tuple(
    (re.compile("|".join(words)), kind) for kind, words in _ZH_CUE_WORDS.items()
)
# the same words heard as homophones (手鸡号 for 手机号, 身份正 for 身份证): pipeline.numbers.sound
_ZH_SOUND_CUES = tuple((SoundPhrase.of(w), kind) for kind, words in _ZH_CUE_WORDS.items() for w in words)
_ZH_UNCHECKED_SOUND_CUES = tuple(
    (SoundPhrase.of(w), kind) for kind, words in _ZH_UNCHECKED_CUE_WORDS.items() for w in words
)
# kinds with no check digit, taken on their cue alone; not cues of the ASR's number regions, which
# were measured on the kinds above ("your account" is said in most calls without a number)
_UNCHECKED_CUES: tuple[tuple[re.Pattern[str], PIIType], ...] = (
    (re.compile(r"\b(?:social security|security number|ssn|social)\b"), "us_ssn"),
    (re.compile(r"\b(?:account|acct)\b|" + "|".join(_ZH_UNCHECKED_CUE_WORDS["account_number"])), "account_number"),
    (
        re.compile(
            r"\b(?:cvv2?|cvc2?|security code|card verification|verification (?:code|value)|on the back|pin|pin code)\b|"
            + "|".join(_ZH_UNCHECKED_CUE_WORDS["card_secret"])
        ),
        "card_secret",
    ),
)
_CHECKED_CUES = (*_EN_CUES, *_ZH_CUES)
_ALL_CUES = (*_CHECKED_CUES, *_UNCHECKED_CUES)
_ALL_SOUND_CUES = (*_ZH_SOUND_CUES, *_ZH_UNCHECKED_SOUND_CUES)
# words that only open a number region (which kind is unknown): worth a second decode, never a type
_EN_NUMBER_WORDS = re.compile(r"\b(?:number|digits|ssn|social security)\b")
_ZH_NUMBER_WORDS = re.compile(r"号码|账号|尾号|卡号|号是|身份证号|手机号")
# a request for, or a reading of, a number's last digits only ("the last four", "ending in", 尾号, 后四位)
_TAIL_WORDS = re.compile(r"\blast (?:4|four)\b|\bending\b|\bends (?:in|with)\b|尾号|[后末](?:4|四)位")
# the first pass hears 尾号 as 委号, 为号 or 位号 ("我的塔后委号是3759"): a tail all the same (reads_tail)
_ZH_TAIL_SOUND = SoundPhrase.of("尾号")
TAIL_DIGITS = 4
# a number followed by one of these is an amount, a quantity or a time, not an identifier
_UNITS = (
    r"dollars?|cents?|euros?|pounds?|yuan|rmb|usd|percent|per cent|%|minutes?|hours?|days?|"
    r"years?|months?|weeks?|am|pm|o'clock|元|块|毛|角|分钟|小时|天|年|月|号|日|点|岁|个|%"
)
_UNIT_AFTER = re.compile(rf"^\s*(?:{_UNITS}|times|次)")
# in an answer that names the code, "N times" is digits heard as a count: "seven five zero" came
# out "the code is 7 times Nero" on 8 kHz u-law (tools/word_calls dev calls); "I tried it 3 times" is not
_CODE_UNIT_AFTER = re.compile(rf"^\s*(?:{_UNITS})")
_COUNT_AFTER = re.compile(r"^\s*(?:times|次)")
_CODE_NAMED = re.compile(r"\b(?:code|cvv2?|cvc2?|digits)\b")
_AMOUNT_BEFORE = re.compile(r"(?:\$|¥|￥|€|£|usd|rmb)\s*$")
# between a cue and a number, a word that makes the number an amount ("my account balance is …",
# "the card limit is …", 账户余额是…), said without its currency
_AMOUNT_AFTER_CUE = re.compile(
    r"\b(?:balance|amount|total|limit|owe|owed|paid|pay|payment|charged?|fee|bill|overdrawn|worth|cost)\b"
    r"|余额|金额|额度|欠|付|扣|费|共"
)
DIGIT_RUN = re.compile(r"[0-9]+(?: [0-9]+)*")
_THOUSANDS = re.compile(r"(?<![0-9.,])[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])")  # "200,000": how ASR writes an amount
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+")  # a CJK character, or a run of other word characters


def cue_type(text: str) -> PIIType | None:
    """The PII type a cue in ``text`` (normalised) names, the last cue in it winning."""
    cue = _last_cue(text, _ALL_CUES, _ALL_SOUND_CUES)
    return cue[0] if cue else None


def _last_cue(
    text: str,
    cues: tuple[tuple[re.Pattern[str], PIIType], ...],
    sounds: tuple[tuple[SoundPhrase, PIIType], ...] = (),
) -> tuple[PIIType, int] | None:
    """The last of ``cues`` (or of the Chinese cue words ``sounds``, said or heard as homophones)
    in ``text``: the type it names and where it ends."""
    span = _last_cue_span(text, cues, sounds)
    return (span[0], span[2]) if span else None


def _last_cue_span(
    text: str,
    cues: tuple[tuple[re.Pattern[str], PIIType], ...],
    sounds: tuple[tuple[SoundPhrase, PIIType], ...] = (),
) -> tuple[PIIType, int, int] | None:
    """As :func:`_last_cue`, with where the cue starts."""
    spans = [(m.start(), kind, m.end()) for pattern, kind in cues for m in pattern.finditer(text)]
    if sounds and any(is_cjk(ch) for ch in text):
        spans += [(a, kind, b) for word, kind in sounds for a, b in word.finditer(text)]
    # of cues starting at one place the longest names the kind ("card verification" over "card")
    best = max(spans, key=lambda span: (span[0], span[2]), default=None)
    return (best[1], best[0], best[2]) if best else None


def cued_type(before: str, digits: str, after: str = "") -> PIIType | None:
    """The type of the digit run ``digits`` taken on its cue alone: a cue in the
    ``CUE_WITHIN_CHARS`` characters before it, 9-20 digits (or as ``CUED_DIGITS`` says for the
    kind), no currency sign before and no unit after it. ``before`` and ``after`` are the
    normalised text around the run."""
    looped = len(digits) >= MIN_LOOP_DIGITS and len(set(digits)) < 3
    if looped or _UNIT_AFTER.match(after) or _AMOUNT_BEFORE.search(before):
        return None
    window = before[-CUE_WITHIN_CHARS:]
    cue = _last_cue(window, _ALL_CUES, _ALL_SOUND_CUES)
    if cue is None or _AMOUNT_AFTER_CUE.search(window[cue[1] :]):
        return None
    kind = cue[0]
    low, high = CUED_DIGITS.get(kind, (MIN_CUED_DIGITS, MAX_CUED_DIGITS))
    return kind if low <= len(digits) <= high else None


# how an answer to "… and the security code?" opens before the code: "the code is", "it's", "cvv",
# "the three digits are", or nothing at all
_SECRET_ANSWER_LEAD = re.compile(r"^\W*$|\b(?:code|cvv2?|cvc2?|digits|it|its)\b")


def misheard_secret(question: str, lead: str, digits: str, after: str) -> bool:
    """Is ``digits`` (fewer than a code has) what is left of a card's security code that ASR wrote
    partly as words? The other party's ``question`` asked for the code (its cue in its last
    ``CUE_WITHIN_CHARS``), the answer's ``lead`` opens like an answer, and no unit follows. On
    8 kHz u-law the first pass writes "near-o-9-7", "6x6" or "7 times Nero" for a three-digit code
    (tools/word_calls dev calls: 3 of 4 codes): a card-scheme rule forbids keeping it, so the
    detector fails closed there. All normalised text."""
    if not 0 < len(digits) < CUED_DIGITS["card_secret"][0] or _CODE_UNIT_AFTER.match(after):
        return False
    if _COUNT_AFTER.match(after) and not _CODE_NAMED.search(lead):
        return False
    asked = _last_cue(question[-CUE_WITHIN_CHARS:], _ALL_CUES, _ALL_SOUND_CUES)
    said = _last_cue(lead, _ALL_CUES, _ALL_SOUND_CUES)  # "the security code is near-o-tate 4"
    named = any(cue is not None and cue[0] == "card_secret" for cue in (asked, said))
    return named and _SECRET_ANSWER_LEAD.search(lead) is not None


def cue_end(text: str) -> int:
    """Where the last cue naming a number's kind ends in ``text`` (0: none). An answer's lead is
    measured from there: "Sure, the security code is" opens an answer as "it's" does."""
    cue = _last_cue(text, _ALL_CUES, _ALL_SOUND_CUES)
    return cue[1] if cue else 0


# a number's kind and a word for a number, then "is": "my card number is", "the long number on the
# card is", "the security code is", 卡号是, 身份证号码是. What follows is the number, however it was heard.
_COPULA = re.compile(r"\b(?:is|are|reads)\b|是|为")
ANNOUNCE_WITHIN_CHARS = 16  # from the cue's end to the copula: "card| number is", "card| is" (… number on the card is)
ASK_WITHIN_CHARS = 48  # "… and the security code on the back, please?" as one question


def announcements(norm: Normalized) -> list[int]:
    """Where in a normalised text a number is announced to start: right after each "is" that
    follows, in its own clause, a cue naming a kind and a word for a number (a card's security code
    needs none), with no amount word between ("the card limit is …") and not a number's last
    digits (尾号是). The clause is the original text's: normalising drops the punctuation that
    ends "…您的手机号码。系统显示您的账户目前是正常状态"."""
    text, out = norm.text, []
    tails = _tail_spans(text)
    for m in _COPULA.finditer(text):
        head = norm.original[: norm.starts[m.start()]]
        clause_start = len(head) - len(_CLAUSE_END.split(head)[-1])  # in the original text
        first = bisect.bisect_left(norm.starts, clause_start, 0, m.start())
        since = max(first, m.start() - CUE_WITHIN_CHARS)
        before = text[since : m.start()]
        cue = _last_cue(before, _ALL_CUES, _ALL_SOUND_CUES)
        if cue is None or len(before) - cue[1] > ANNOUNCE_WITHIN_CHARS or _AMOUNT_AFTER_CUE.search(before):
            continue
        # "my card ending is 3759", 卡号尾号是, 卡号为号是 (为 of a misheard 尾号 is no copula): a tail names no one
        if any(a < m.end() and b > since for a, b in tails):
            continue
        if cue[0] == "card_secret" or _EN_NUMBER_WORDS.search(before) or _ZH_NUMBER_WORDS.search(before):
            out.append(m.end())
    return out


_CLAUSE_END = re.compile(r"[.?!;。？！；，,]\s*")


def asks_for_code(text: str) -> bool:
    """Does ``text`` (normalised) end asking for a card's security code: the last cue in its last
    ``ASK_WITHIN_CHARS`` characters names one ("… and the security code on the back?"), and no word
    near it speaks of the secret rather than asking for it (:data:`_SECRET_HANDLED`)."""
    tail = text[-ASK_WITHIN_CHARS:]
    cue = _last_cue_span(tail, _ALL_CUES, _ALL_SOUND_CUES)
    if cue is None or cue[0] != "card_secret":
        return False
    near = tail[max(0, cue[1] - HANDLED_WITHIN_CHARS) : cue[2] + HANDLED_WITHIN_CHARS]
    return not _SECRET_HANDLED.search(near)


# a secret spoken of, not asked for: forgotten, reset, keyed in, never to be told ("did you forget
# your PIN?", 您是要重置密码吗, 请先输入交易密码, 请不要向任何人透露密码). Whatever answers such a
# question ("yes", 对，我忘了) holds no code.
_SECRET_HANDLED = re.compile(
    r"\b(?:forg[eo]t\w*|reset\w*|chang\w*|unlock\w*|lock\w*|block\w*|enter\w*|type|shar\w*|never)\b"
    r"|重置|重设|修改|更改|忘|记得|设置|输入|锁|冻结|透露|泄露|任何人|不要|不会"
)
HANDLED_WITHIN_CHARS = 12


def word_count(text: str) -> int:
    """Words in ``text`` (normalised), each Chinese character one."""
    return len(_WORD.findall(text))


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
    return bool(
        _EN_NUMBER_WORDS.search(norm) or _ZH_NUMBER_WORDS.search(norm) or _last_cue(norm, _CHECKED_CUES, _ZH_SOUND_CUES)
    )


def reads_tail(text: str) -> bool:
    """Does this text give a number's last four digits as asked ("the card ending 4212", 我的卡尾号是3759):
    a cue for the last digits (尾号 also as heard: 委号, 为号, 位号), and a longest digit run of exactly
    that many? Such a number is whole as written, and no identifier a rule could take."""
    return longest_digit_run(text) == TAIL_DIGITS and bool(_tail_spans(normalize(text).text))


def _tail_spans(norm: str) -> list[tuple[int, int]]:
    """Where normalised text asks for or reads a number's last digits: a tail word, or 尾号 as heard."""
    spans = [m.span() for m in _TAIL_WORDS.finditer(norm)]
    return spans + list(_ZH_TAIL_SOUND.finditer(norm)) if any(map(is_cjk, norm)) else spans


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
    return any(ch.isdigit() for ch in norm) or word_count(norm) <= MAX_CONTINUING_WORDS
