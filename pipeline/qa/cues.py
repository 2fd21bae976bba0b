"""Whether a phrase is asserted: negated ("we cannot promise guaranteed returns", "不能保证收益")
or asked ("is it risk free?", "保本吗") uses of a forbidden phrase are not violations.

Judged on the original text of the clause holding the match (punctuation is gone after
normalisation): the few words (English) or characters (Chinese) before the phrase for a
negation, the clause's end and opening for a question. ASR often drops the question mark,
so Chinese question particles and English inverted openings count too.
"""

from __future__ import annotations

import re

NEGATION_WINDOW_WORDS = 5
NEGATION_WINDOW_CHARS = 6

_CLAUSE_END = re.compile(r"[.!?;。！？；\n]")
_EN_NEGATIONS = frozenset(
    "not no never cannot cant can't don't dont won't wont isn't isnt aren't arent doesn't doesnt "
    "didn't didnt couldn't wouldn't shouldn't nobody nothing neither nor without hardly unable".split()
)
_ZH_NEGATIONS = ("不", "没", "无法", "未", "别", "并非", "绝非", "谈不上")
_ZH_NOT_NEGATIONS = re.compile("不错|不过|不少|不仅|不但|不断|不用担心|没错|没问题")
_ZH_QUESTION_END = re.compile(r"(吗|嘛|么)\s*$")
QUESTION_PARTICLE_WITHIN_CHARS = 4  # "保本吗", "是零风险的吗"; ASR runs sentences together without marks
_ZH_A_NOT_A = re.compile(r"(是不是|有没有|能不能|会不会|可不可以|是否|保不保)")
_EN_QUESTION_OPENING = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|will|would|should|is there|are there)\b",
    re.IGNORECASE,
)
_EN_WORD = re.compile(r"[a-z']+")


def clause(text: str, start: int, end: int) -> tuple[str, str, str]:
    """(before, phrase, after) within the sentence-like clause holding text[start:end]."""
    lo = max((m.end() for m in _CLAUSE_END.finditer(text, 0, start)), default=0)
    m = _CLAUSE_END.search(text, end)
    hi = m.end() if m else len(text)
    return text[lo:start], text[start:end], text[end:hi]


def negated(text: str, start: int, end: int) -> bool:
    """Is text[start:end] negated by a word shortly before it in its clause?"""
    before, _, _ = clause(text, start, end)
    # ASR writes "can't" / "cannot" / "can not"; commas inside the clause do not end the scope
    words = _EN_WORD.findall(before.lower().replace("’", "'"))[-NEGATION_WINDOW_WORDS:]
    if any(w in _EN_NEGATIONS or w.endswith("n't") for w in words):
        return True
    # a Chinese negation's scope ends at a comma ("我们不收手续费，保本保息" still promises)
    tail = re.sub(r"\s", "", re.split(r"[，,、]", before)[-1])[-NEGATION_WINDOW_CHARS:]
    tail = _ZH_NOT_NEGATIONS.sub("", tail)
    return any(cue in tail for cue in _ZH_NEGATIONS)


def asked(text: str, start: int, end: int) -> bool:
    """Is the clause holding text[start:end] a question?"""
    before, phrase, after = clause(text, start, end)
    whole = before + phrase + after
    if re.search(r"[?？]\s*$", whole.strip()) or re.search(r"[?？]", after):
        return True
    near_end = re.split(r"[，,\s]", after, maxsplit=1)[0][: QUESTION_PARTICLE_WITHIN_CHARS + 1]
    if _ZH_QUESTION_END.search(re.sub(r"[。！？!?.]+$", "", near_end)):
        return True
    if _ZH_A_NOT_A.search(before + phrase):
        return True
    return bool(_EN_QUESTION_OPENING.match(re.split(r"[,，]", before)[-1] if before else ""))
