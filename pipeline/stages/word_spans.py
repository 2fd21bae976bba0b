"""PII text ranges -> the words they cover (times for audio redaction, labels for words at rest). Pure.

A segment's words are its text's words in order (the engine cuts them from the same tokens),
so each word is found in the text by a forward search; a PII hit's character range in the
segment's original text then names the words it overlaps.
"""

from __future__ import annotations

from collections.abc import Sequence

WordT = tuple[float, float, str]


def word_ranges(text: str, words: Sequence[WordT]) -> list[tuple[int, int] | None]:
    """Character range of each word in ``text`` (None: not found after the word before)."""
    out: list[tuple[int, int] | None] = []
    pos = 0
    for _, _, word in words:
        at = text.find(word, pos) if word else -1
        if at < 0:
            out.append(None)
            continue
        out.append((at, at + len(word)))
        pos = at + len(word)
    return out


def covered_words(text: str, words: Sequence[WordT], ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the words overlapping any of ``ranges`` (characters of ``text``). A word not
    found in the text is taken when it holds a digit (fail closed: it may be a number's)."""
    out = []
    for i, (span, (_, _, word)) in enumerate(zip(word_ranges(text, words), words, strict=True)):
        if span is None:
            if any(ch.isdigit() for ch in word):
                out.append(i)
        elif any(span[0] < hi and lo < span[1] for lo, hi in ranges):
            out.append(i)
    return out
