"""Conversation metrics from segment times alone: silence, talk-over, speech rate, talk ratio.

Segments are VAD speech windows, so their union is "someone is speaking". Silence
counts only between the first and the last speech (ringing and hang-up are not the
agent's doing). Talk-over needs one channel per party, so it is measured on stereo
calls only: a mono call's segments say nothing about who spoke when.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pipeline.intervals import merge_intervals
from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import is_cjk
from pipeline.qa.model import CallText, LanguageNote

Interval = tuple[float, float]
Language = Literal["zh", "en"]  # what speech rate is counted in: characters or words


def total_s(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def silences(call: CallText, min_s: float = 0.0) -> list[Interval]:
    """Gaps with no speech on any channel, longer than ``min_s``, between first and last speech."""
    speech = merge_intervals((s.start_s, s.end_s) for s in call.segments)
    gaps = [(a[1], b[0]) for a, b in zip(speech, speech[1:], strict=False)]
    return [(start, end) for start, end in gaps if end - start > min_s]


def edge_silences(call: CallText, min_s: float) -> list[tuple[float, float, str]]:
    """Silence before the first and after the last speech, longer than ``min_s``."""
    speech = merge_intervals((s.start_s, s.end_s) for s in call.segments)
    if not speech:
        return []
    edges = [(0.0, speech[0][0], "at the start"), (speech[-1][1], call.duration_s, "at the end")]
    return [(a, b, where) for a, b, where in edges if b - a > min_s]


def overlaps(call: CallText, min_s: float = 0.0, bridge_s: float = 0.0) -> list[Interval]:
    """Stretches where two or more channels speak at once, longer than ``min_s`` (stereo only).

    A channel's pauses up to ``bridge_s`` are bridged: VAD and ASR split a turn at every
    breath, and talking over someone does not stop while they take one.
    """
    if call.channels < 2:
        return []
    per_channel = [
        merge_intervals((s.start_s, s.end_s + bridge_s) for s in call.segments if s.channel == ch)
        for ch in sorted({s.channel for s in call.segments})
    ]
    per_channel = [[(a, b - bridge_s) for a, b in spans] for spans in per_channel]
    found: list[Interval] = []
    for i, first in enumerate(per_channel):
        for second in per_channel[i + 1 :]:
            found.extend(_intersect(first, second))
    return [(a, b) for a, b in merge_intervals(found) if b - a > min_s]


def _intersect(first: Sequence[Interval], second: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        if start < end:
            out.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return out


def is_rule_language(code: str) -> bool:
    """Whether the rule packs are written for this language code (English, Mandarin/Chinese)."""
    code = code.lower()
    return code.startswith(("en", "zh")) or code in ("cmn", "yue")


def unsupported_language(call: CallText) -> LanguageNote | None:
    """The language outside the packs' that the call is spoken in, as its transcript says it
    (flagged by the engine, or a channel's language code from another producer)."""
    if call.unsupported_language is not None:
        return call.unsupported_language
    spoken = {s.channel for s in call.segments}
    other = sorted((lang, int(ch)) for ch, lang in call.languages.items()
                   if lang and not is_rule_language(lang) and ch.isdigit() and int(ch) in spoken)
    if not other:
        return None
    language = other[0][0]
    return LanguageNote(language, 1.0, tuple(ch for lang, ch in other if lang == language))


def segment_language(call: CallText, segment: SegmentText) -> Language:
    """The channel's language from the transcript, else guessed from the script ("zh"/"en")."""
    lang = (call.language_of(segment.channel) or "").lower()
    if lang.startswith("zh") or lang in ("cmn", "yue"):
        return "zh"
    if lang.startswith("en"):
        return "en"
    return "zh" if any(is_cjk(ch) for ch in segment.text) else "en"


def speech_units(text: str, language: Language) -> int:
    """Characters (Chinese) or words (English): the unit speech rate is measured in."""
    if language == "zh":
        return sum(1 for ch in text if is_cjk(ch) or ch.isdigit())
    return sum(1 for word in text.split() if any(ch.isalnum() for ch in word))


@dataclass(frozen=True)
class RateSample:
    """Speech of one language by one role: how many units in how many seconds of speech."""

    language: Language
    units: int
    speech_s: float

    @property
    def per_min(self) -> float:
        return self.units / self.speech_s * 60.0 if self.speech_s > 0 else 0.0


def speech_rates(call: CallText, segments: Sequence[SegmentText]) -> dict[Language, RateSample]:
    """Rate per language over the given segments (usually the agent's, in a rule's window)."""
    units: dict[Language, int] = {}
    seconds: dict[Language, float] = {}
    for seg in segments:
        lang = segment_language(call, seg)
        units[lang] = units.get(lang, 0) + speech_units(seg.text, lang)
        seconds[lang] = seconds.get(lang, 0.0) + (seg.end_s - seg.start_s)
    return {lang: RateSample(lang, units[lang], seconds[lang]) for lang in units}


def talk_seconds(segments: Iterable[SegmentText], role: str) -> float:
    """Speech time of one role (overlapping segments counted once)."""
    return total_s(merge_intervals((s.start_s, s.end_s) for s in segments if s.role == role))


def talk_ratio(call: CallText, segments: Sequence[SegmentText] | None = None) -> tuple[float, float] | None:
    """(agent share of agent+customer speech time, total seconds), None when roles are unknown."""
    segs = call.segments if segments is None else segments
    agent = talk_seconds(segs, "agent")
    customer = talk_seconds(segs, "customer")
    if agent + customer <= 0:
        return None
    return agent / (agent + customer), agent + customer
