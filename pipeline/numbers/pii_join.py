"""Which of one channel's segments the PII detector reads as one stream of text.

People say long numbers in pieces. Consecutive segments of the same channel and role are
joined (a space between them) when the pause is short (``MAX_JOIN_GAP_S``), and also across
a longer pause (``MAX_RESUME_GAP_S``) when the number visibly carries on: the earlier segment
ends in digits and the later one opens with digits, each piece at least ``MIN_RESUME_DIGITS``
long. That is a card read in halves while the agent reads the first half back on the other
channel ("it's 4532 0151" … "1283 0366"), or waits for it to be written down. On a mono call
(one speaker label) the agent's "go on", "okay", "mm-hm" between the halves is a segment of
the same stream: such a segment of interjections alone carries the number over it.

A longer pause, another role, or a piece that is an amount or a date ("I paid 2500", "on
2024 03 15") is a line break: the detector never joins numbers across one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import Normalized

MAX_JOIN_GAP_S = 3.0  # a customer pausing mid-number splits it across segments
# A read-back of 8 digits is about 3-4 s of speech, with a turn gap either side: 10 s leaves room
# for a slow one, and is far less than a change of topic takes.
MAX_RESUME_GAP_S = 10.0
MIN_RESUME_DIGITS = 4  # a number read in groups carries on in groups of four; an amount ("250") does not

# what the other party says while a number is read out (normalised: "mm-hm" → "mm hm")
_INTERJECTION_WORDS = (
    r"(?:go on|go ahead|carry on|keep going|continue|hold on|hang on|okay|ok|alright|all right|right|yes|yeah|"
    r"yep|yup|sure|got it|perfect|mm hm|mhm|mm|uh huh|hmm|嗯|好的|好|对|继续|请说)"
)
INTERJECTIONS = re.compile(rf"{_INTERJECTION_WORDS}(?: ?{_INTERJECTION_WORDS}){{0,2}}")
_DIGIT_GROUPS = re.compile(r"[0-9]+(?: [0-9]+)*")
_LEADING_DIGITS = re.compile(rf"(?:{INTERJECTIONS.pattern} ?)?({_DIGIT_GROUPS.pattern})")
# before the trailing digits (looked for in the last few characters): they are a date, a time
# or an amount, not half a number
_WORD_BEFORE_CHARS = 12  # "until ", "balance $"
_NOT_A_PIECE = re.compile(
    r"(?:\b(?:at|on|from|till|until|by|since|before|after|paid|pay|cost|costs|total|balance|owe)|[$¥￥€£])\s*$"
)


def channel_stream(
    segments: Sequence[SegmentText], norms: Sequence[Normalized], order: list[int], max_gap_s: float
) -> tuple[str, list[tuple[int, int]]]:
    """One channel's normalised text (segments ``order``) and where each segment starts in it:
    joined segments are separated by a space, others by a line break."""
    parts: list[str] = []
    offsets: list[tuple[int, int]] = []  # (stream offset, segment index)
    pos = 0
    open_digits = 0  # digits of the number the stream ends with, looking through interjections
    for n, idx in enumerate(order):
        text = norms[idx].text
        joined = n > 0 and _joins(segments[order[n - 1]], segments[idx], text, open_digits, max_gap_s)
        if n:
            parts.append(" " if joined else "\n")
            pos += 1
        if INTERJECTIONS.fullmatch(text):
            open_digits = open_digits if joined else 0
        else:
            open_digits = _trailing_digits(text)
        offsets.append((pos, idx))
        parts.append(text)
        pos += len(text)
    return "".join(parts), offsets


def _joins(prev: SegmentText, seg: SegmentText, text: str, open_digits: int, max_gap_s: float) -> bool:
    if prev.role != seg.role:
        return False
    gap_s = seg.start_s - prev.end_s
    if gap_s <= max_gap_s:
        return True
    resumes = INTERJECTIONS.fullmatch(text) is not None or _leading_digits(text) >= MIN_RESUME_DIGITS
    return gap_s <= MAX_RESUME_GAP_S and open_digits >= MIN_RESUME_DIGITS and resumes


def _trailing_digits(text: str) -> int:
    """Digits in the run of digit groups that ends ``text`` (0 if it is a date, time or amount)."""
    if not text or not text[-1].isdigit():
        return 0
    m = _DIGIT_GROUPS.match(text[::-1])  # from the end: a search for "…$" rescans a loop from every digit
    start = len(text) - m.end() if m else len(text)
    if m is None or _NOT_A_PIECE.search(text[max(0, start - _WORD_BEFORE_CHARS) : start]):
        return 0
    return sum(ch.isdigit() for ch in m.group())


def _leading_digits(text: str) -> int:
    """Digits in the run of digit groups that opens ``text``, after an interjection if any."""
    m = _LEADING_DIGITS.match(text)
    return 0 if m is None else sum(ch.isdigit() for ch in m.group(1))
