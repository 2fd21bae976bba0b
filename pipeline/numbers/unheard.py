"""Where a number was said but ASR did not write it as digits: fail-closed redaction.

On 8 kHz u-law a number read digit by digit can come out as words ("five seven five" as "I'm
Evan, I'm", "three" as "free"): the detector sees too few digits, yet the audio still says the
number. Two places are known to hold one whatever was heard there:

- **announced**: after a party names a number's kind and says "is" ("my card number is", "the long
  number on the card is", 卡号是), the rest of that party's turn, up to the first number the
  detector found, or, where it found none, ``MAX_ANNOUNCED_WORDS`` words if a digit (or digit
  word) is among them;
- **a security code asked for**: the customer's short answer (``MAX_CODE_ANSWER_WORDS`` words)
  right after the agent's question for a card's security code, from after its opening "is" ("the
  code is", "it's"; else its start) up to the first number found. A card-scheme rule forbids
  keeping the code in any form.

tools/word_calls dev calls, seeds 3-5 (8 kHz u-law and 16 kHz mono): 15 of 30 numbers were fully
cut before this, 28 of 30 with it; most of what was missed was such words. Redaction only: no kind is known, so QA rules
judge nothing here (the stretches are masked as the backstop's runs are). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.intervals import merge_intervals
from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import Normalized, normalize
from pipeline.numbers.pii import PIIHit, question_before
from pipeline.numbers.pii_join import MAX_JOIN_GAP_S
from pipeline.numbers.spoken import announcements, asks_for_code, cue_end, names_amount, word_count

MAX_ANNOUNCED_WORDS = 24  # a 19-digit card read digit by digit, with a few fillers
MAX_CODE_ANSWER_WORDS = 10  # "If you are with it, code in for one eight" (the code is four one eight)

Ranges = dict[int, list[tuple[int, int]]]  # segment index -> [start, end) of its original text


def unheard_ranges(segments: Sequence[SegmentText], norms: Sequence[Normalized], hits: Sequence[PIIHit]) -> Ranges:
    """Per segment, the stretches of its original text that are a number no hit took."""
    found: dict[int, list[int]] = {}
    for hit in hits:
        for idx, start, _ in hit.parts:
            found.setdefault(idx, []).append(start)
    order = sorted(range(len(segments)), key=lambda i: (segments[i].start_s, i))
    out: Ranges = {}
    for pos, i in enumerate(order):
        for at in announcements(norms[i]):
            _add(out, segments, _until_found(segments, _announced(segments, norms, order, pos, at), found))
        question = question_before(segments, i)
        if question is not None and _answers(segments[question], segments[i]) and _asks(norms[question].text):
            lead = _answer_lead(norms[i])
            stretch = [(i, _original(norms[i], lead) if lead else 0, len(segments[i].text))]
            if word_count(norms[i].text) <= MAX_CODE_ANSWER_WORDS and not names_amount(segments[i].text):
                _add(out, segments, _until_found(segments, stretch, found, need_digit=False))
    return {i: merge_intervals(r) for i, r in out.items()}


# how an answer opens before the code: "it's", "the code is", "sure, it is" (heard as "a code is",
# "if you already called, is" on 8 kHz u-law: the words before its "is" are seldom the code's)
_OPENER = re.compile(r"\b(?:is|s)\b")
OPENER_WITHIN_CHARS = 32


def _answer_lead(norm: Normalized) -> int:
    """Where the code starts in an answer (normalised offset): after its announcement ("the security
    code is"), else after an opening "is" in its first ``OPENER_WITHIN_CHARS``, else after a cue, else 0."""
    said = announcements(norm)
    opener = _OPENER.search(norm.text, 0, OPENER_WITHIN_CHARS)
    return said[-1] if said else opener.end() if opener else cue_end(norm.text)


def _original(norm: Normalized, at: int) -> int:
    """The original offset of normalised offset ``at`` (its end: the whole text)."""
    return norm.starts[at] if at < len(norm.text) else len(norm.original)


def _announced(
    segments: Sequence[SegmentText], norms: Sequence[Normalized], order: list[int], pos: int, at: int
) -> list[tuple[int, int, int]]:
    """From normalised offset ``at`` in segment ``order[pos]`` on through its party's turn (its next
    segments on the channel a short pause apart, until the other party speaks), sentence by
    sentence, until the turn has said enough for a number (:func:`_heard_enough`)."""
    i = order[pos]
    stretch: list[tuple[int, int, int]] = []
    said = ""
    prev = segments[i]
    for k in [i, *order[pos + 1 :]]:
        seg = segments[k]
        if k != i and (seg.start_s - prev.end_s > MAX_JOIN_GAP_S or seg.role != prev.role):
            break
        if seg.channel != prev.channel:
            continue
        for start, end in _sentences(seg.text, _original(norms[i], at) if k == i else 0):
            if said and _heard_enough(said):
                return stretch
            stretch.append((k, start, end))
            said += " " + normalize(seg.text[start:end]).text
        prev = seg
    return stretch


_SENTENCE_END = re.compile(r"[.?!。？！]+(?=\s|$)")


def _sentences(text: str, start: int) -> list[tuple[int, int]]:
    """``text[start:]`` cut after each sentence's end (a mono mix puts the other party's reply in
    the same segment: "… is 0 7 7 0 0 9 0. May I have the card number, please?")."""
    out, pos = [], start
    for m in _SENTENCE_END.finditer(text, start):
        out.append((pos, m.end()))
        pos = m.end()
    return [*out, (pos, len(text))] if pos < len(text) else out


def _heard_enough(said: str) -> bool:
    """Has the turn said its number: ``MAX_ANNOUNCED_WORDS`` words, or a sentence with a digit in it
    (the number, heard in part or whole: "your phone number is 150." is not followed by it)."""
    return word_count(said) >= MAX_ANNOUNCED_WORDS or any(ch.isdigit() for ch in said)


def _until_found(
    segments: Sequence[SegmentText],
    stretch: list[tuple[int, int, int]],
    found: dict[int, list[int]],
    need_digit: bool = True,
) -> list[tuple[int, int, int]]:
    """The stretch up to the first number a hit took in it; where none, the whole stretch if a digit
    (or a digit word) is in it, else nothing (``need_digit``)."""
    out: list[tuple[int, int, int]] = []
    for idx, start, end in stretch:
        first = min((s for s in found.get(idx, []) if start <= s < end), default=None)
        if first is not None:
            return [*out, (idx, start, first)]
        out.append((idx, start, end))
    heard = any(_digit_heard(segments[idx].text[start:end]) for idx, start, end in out)
    return out if heard or not need_digit else []


def _digit_heard(text: str) -> bool:
    """A digit or a digit word in ``text`` (not a homophone: "to" and "for" are in most sentences)."""
    return any(ch.isdigit() for ch in normalize(text).text)


def _asks(question: str) -> bool:
    """Does this (normalised) turn ask for a security code, not give one ("the code is 4 1 8")?"""
    return asks_for_code(question) and not any(ch.isdigit() for ch in question)


def _answers(question: SegmentText, answer: SegmentText) -> bool:
    """The customer answering the agent, or any next turn of a mono call whose parties are not told
    apart. A party's own next sentence (a disclosure) keeps its words for QA; a customer does not
    ask for its own code ("the security code on the back is …" is an answer)."""
    if question.role in ("agent", "customer") and answer.role in ("agent", "customer"):
        return question.role == "agent" and answer.role == "customer"
    return answer.role != question.role or answer.role == "mixed"


def _add(out: Ranges, segments: Sequence[SegmentText], stretch: list[tuple[int, int, int]]) -> None:
    """The stretch's pieces, each trimmed to its first and last word that is not a label already
    there ("[CARD]", "[NUMBER]": a transcript redacted before is redacted the same again)."""
    for idx, start, end in stretch:
        words = [m for m in _WORD_OR_LABEL.finditer(segments[idx].text, start, end) if m.group(1) is None]
        if words:
            out.setdefault(idx, []).append((words[0].start(), words[-1].end()))


_WORD_OR_LABEL = re.compile(r"(\[[A-Z_]+\])|\w+(?:'\w+)*")
