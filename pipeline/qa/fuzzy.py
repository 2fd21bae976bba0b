"""Tolerant phrase matching: a required phrase said with small ASR errors still counts.

Text and phrase become tokens: English words, and for Chinese one pinyin syllable per
character (toneless), so a homophone the recogniser picked ("路音" for "录音") costs
nothing. The phrase is aligned anywhere in the text (semi-global edit distance over
tokens): a missing or extra token costs 1, a substituted one 1, or less for an English
word spelt nearly the same ("recorder" for "recorded"). Similarity is
``1 - cost / phrase tokens``. Short phrases are not aligned: one wrong token in three is
already a different phrase (Chinese ones of 2-3 characters match by sound only,
:mod:`pipeline.numbers.sound`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import Indel

from pipeline.numbers.normalize import is_cjk

MIN_FUZZY_TOKENS = 3  # English words; Chinese phrases need MIN_FUZZY_CJK characters
MIN_FUZZY_CJK = 4  # shorter Chinese phrases must sound exactly the same (pipeline.numbers.sound)
NEAR_WORD = 0.6  # English words at least this similar (Indel ratio) substitute cheaply

_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


@dataclass(frozen=True)
class Token:
    sound: str  # the word, or the pinyin of a Chinese character
    start: int  # offsets in the normalised text
    end: int
    cjk: bool


@functools.lru_cache(maxsize=8192)
def _pinyin(ch: str) -> str:
    from pypinyin import lazy_pinyin  # on first use: its dictionaries take ~0.8 s to load

    return lazy_pinyin(ch)[0]


def tokens(text: str) -> list[Token]:
    """Words and Chinese characters (as pinyin) of a normalised text, with their offsets."""
    out = []
    for m in _TOKEN.finditer(text):
        word = m.group()
        cjk = is_cjk(word[0])
        out.append(Token(_pinyin(word) if cjk else word, m.start(), m.end(), cjk))
    return out


def fuzzy_eligible(phrase_tokens: list[Token]) -> bool:
    cjk = sum(t.cjk for t in phrase_tokens)
    return cjk >= MIN_FUZZY_CJK if cjk else len(phrase_tokens) >= MIN_FUZZY_TOKENS


@functools.lru_cache(maxsize=65536)
def _substitution(a: str, b: str, cjk: bool) -> float:
    if a == b:
        return 0.0
    if cjk:
        return 1.0
    ratio = Indel.normalized_similarity(a, b)
    return 1.0 - ratio if ratio >= NEAR_WORD else 1.0


@dataclass(frozen=True)
class Alignment:
    similarity: float
    start: int  # offsets in the normalised text of the matched stretch
    end: int


def best_alignment(phrase: list[Token], text: list[Token]) -> Alignment | None:
    """Where the phrase fits the text best (lowest edit cost), or None for an empty input.

    O(len(phrase) * len(text)); callers pre-filter texts sharing too few tokens.
    """
    n = len(phrase)
    if not n or not text:
        return None
    # prev[j]: (cost, start token) of aligning phrase[:i] ending right before text token j
    prev = [(0.0, j) for j in range(len(text) + 1)]
    for i in range(1, n + 1):
        p = phrase[i - 1]
        cur = [(float(i), 0)]
        for j in range(1, len(text) + 1):
            sub = prev[j - 1][0] + _substitution(p.sound, text[j - 1].sound, p.cjk or text[j - 1].cjk)
            options = (
                (sub, prev[j - 1][1]),
                (prev[j][0] + 1.0, prev[j][1]),  # the phrase's token was not said
                (cur[j - 1][0] + 1.0, cur[j - 1][1]),  # an extra token was said
            )
            cur.append(min(options, key=lambda o: o[0]))
        prev = cur
    end_j = min(range(1, len(text) + 1), key=lambda j: (prev[j][0], j))
    cost, start_j = prev[end_j]
    start_j = min(start_j, end_j - 1)
    return Alignment(max(0.0, 1.0 - cost / n), text[start_j].start, text[end_j - 1].end)


def plausible(phrase: list[Token], text_sounds: frozenset[str], min_similarity: float) -> bool:
    """Cheap filter before aligning: enough of the phrase's tokens appear in the text at all,
    exactly or (English) spelt nearly the same, since a near word substitutes cheaply."""
    needed = len(phrase) * min_similarity - 1
    exact = sum(1 for t in phrase if t.sound in text_sounds)
    missing_words = [t for t in phrase if not t.cjk and t.sound not in text_sounds]
    if exact >= needed or exact + len(missing_words) < needed:
        return exact >= needed  # decided without scanning for near words (always, for Chinese)
    return exact + sum(1 for t in missing_words if _near_any(t.sound, text_sounds)) >= needed


def _near_any(word: str, text_sounds: frozenset[str]) -> bool:
    return process.extractOne(word, text_sounds, scorer=Indel.normalized_similarity, score_cutoff=NEAR_WORD) is not None
