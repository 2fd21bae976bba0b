"""Scoring for the engine benchmark: speech coverage, English WER and Mandarin CER, per condition.

Speech coverage is the share of reference speech time that lies inside some output segment,
with the count of reference turns that no output segment overlaps at all. Per party on stereo
calls (that party's channel), and on mono calls against every segment (nothing says which
party a mono segment belongs to). Time alone misses a turn whose time a segment spans with other
turns' words (a decode whose clock ran ahead of its audio), so a turn is also counted *lost*
when the segments overlapping it hold under a fifth of its words (:func:`lost_turns`): no text,
other turns' text, or text too garbled to tell as its own ("Sure, it's in 32-5-3 bar room." for
"Sure, it is 32 High Street, Durham." is one word in seven).

English is scored after the same normalisation for every system: lower case, no punctuation,
digit words as digits, and a run of digits as one token ("7 4 2 9", "seven four two nine" and
"7429" all read "7429"), so a number a recogniser writes as digits is one token either way.
Mandarin likewise: simplified, no punctuation, Chinese numerals as digits (一百二十八 -> 128, by
:func:`pipeline.numbers.normalize.normalize`, which leaves 一下 and 三个 alone), and a run of digits
as one character, so "一百二十八元" and "128元" score the same and a wrong number one error.

Pure: no audio, no models.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import jiwer

from pipeline.asr.text import normalize_en, normalize_zh
from pipeline.numbers.normalize import normalize

Span = tuple[float, float]
MIN_TURN_RECALL = 0.2

_DIGIT_WORDS = {
    w: str(i) for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"))
}
_DIGIT_WORDS["oh"] = "0"
_DIGIT_RUN = re.compile(r"[0-9]+")
_RUN_CHARS: dict[str, str] = {}  # a digit run -> its one character (private use), the same for every text


@dataclass(frozen=True)
class Coverage:
    """Reference speech covered by output, pooled over any number of turns."""

    speech_s: float = 0.0
    covered_s: float = 0.0
    turns: int = 0
    empty_turns: int = 0
    lost_turns: int = 0  # turns whose overlapping output holds under MIN_TURN_RECALL of their words

    @property
    def share(self) -> float:
        return self.covered_s / self.speech_s if self.speech_s else float("nan")

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(
            self.speech_s + other.speech_s,
            self.covered_s + other.covered_s,
            self.turns + other.turns,
            self.empty_turns + other.empty_turns,
            self.lost_turns + other.lost_turns,
        )


def _merged(spans: Iterable[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def speech_coverage(reference: Sequence[Span], output: Sequence[Span]) -> Coverage:
    """How much of the reference turns' time (start_s, end_s) the output segments cover, and how
    many reference turns no output segment overlaps (touching ends do not count as overlap)."""
    covered = _merged(output)
    speech_s = covered_s = 0.0
    empty = 0
    for start, end in reference:
        overlap = sum(max(0.0, min(end, e) - max(start, s)) for s, e in covered)
        speech_s += max(0.0, end - start)
        covered_s += overlap
        empty += overlap <= 0.0
    return Coverage(speech_s, covered_s, len(reference), empty)


def lost_turns(language: str, turns: Sequence[tuple[Span, str]], output: Sequence[tuple[Span, str]]) -> int:
    """Reference turns (time span, text) for which the output segments overlapping them in time
    hold under MIN_TURN_RECALL of the turn's scored words (Mandarin: characters), counted as a
    bag: a turn with no overlapping segment, or one spanned by other turns' text, is lost; a turn
    read badly but read is not."""
    units = _score_units(language)
    lost = 0
    for (start, end), text in turns:
        ref = Counter(units(text))
        heard = Counter(u for (s, e), t in output if min(end, e) > max(start, s) for u in units(t))
        found = sum(min(n, heard[u]) for u, n in ref.items())
        lost += bool(ref) and found < MIN_TURN_RECALL * sum(ref.values())
    return lost


def _score_units(language: str) -> Callable[[str], list[str]]:
    if language == "zh":
        return lambda text: list(score_text_zh(text))
    return lambda text: score_text_en(text).split()


def score_text_en(text: str) -> str:
    """English as scored: normalize_en, digit words as digits, each run of digits one token."""
    tokens: list[str] = []
    for word in normalize_en(text).split():
        word = _DIGIT_WORDS.get(word, word)
        if word.isdigit() and tokens and tokens[-1].isdigit():
            tokens[-1] += word
        else:
            tokens.append(word)
    return " ".join(tokens)


def score_text_zh(text: str) -> str:
    """Mandarin as scored: normalize_zh, Chinese numerals as digits, each run of digits one character."""
    digits = normalize_zh(normalize(text).text)
    return _DIGIT_RUN.sub(lambda m: _RUN_CHARS.setdefault(m.group(), chr(0xF0000 + len(_RUN_CHARS))), digits)


def error_rate(language: str, refs: Sequence[str], hyps: Sequence[str]) -> float:
    """WER (English) or CER (Mandarin) pooled over the pairs; nan when there is no reference."""
    pairs = [(r, h) for r, h in zip(refs, hyps, strict=True) if r.strip()]
    if not pairs:
        return float("nan")
    if language == "zh":
        return float(jiwer.cer([score_text_zh(r) for r, _ in pairs], [score_text_zh(h) for _, h in pairs]))
    return float(jiwer.wer([score_text_en(r) for r, _ in pairs], [score_text_en(h) for _, h in pairs]))
