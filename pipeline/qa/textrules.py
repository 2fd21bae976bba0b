"""Rules over what was said: keyword / regex (any_of, all_of, none_of), forbidden phrases and
required disclosures.

Phrases are normalised like the transcript, so "保證穩賺" matches "保证稳赚" and "No Risk"
matches "no risk". An English phrase must stand on word boundaries ("guaranteed" does not
fire inside "unguaranteed"); Chinese has none to require. An exclusion cancels a match it
overlaps: "不保本" cancels the "保本" inside it, but not a separate "保本" elsewhere.

A rule with ``min_similarity`` also takes a phrase said with small ASR errors
(:mod:`pipeline.qa.fuzzy`); each finding carries the match's similarity as its
confidence. Forbidden phrases that are negated or asked (:mod:`pipeline.qa.cues`) are
not violations unless the rule says otherwise.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.numbers.normalize import normalize_phrase, to_simplified
from pipeline.numbers.sound import SoundPhrase, shares_a_character, sound_eligible
from pipeline.qa.context import CallContext, PreparedSegment, evidence
from pipeline.qa.cues import asked, negated
from pipeline.qa.fuzzy import Token, best_alignment, fuzzy_eligible, plausible, tokens
from pipeline.qa.model import Finding
from pipeline.qa.pack_regex import BoundedPattern, compile_bounded
from pipeline.qa.rules import ForbiddenPhraseRule, KeywordRule, RegexRule, RequiredDisclosureRule

PhraseRule = KeywordRule | RegexRule | ForbiddenPhraseRule | RequiredDisclosureRule

_WORD = re.compile(r"[a-z0-9]")
_DIGIT = re.compile(r"[0-9]")


@functools.lru_cache(maxsize=4096)
def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """Regex for a literal phrase over normalised text, with word boundaries where it is ASCII."""
    norm = normalize_phrase(phrase)
    left = r"(?<![a-z0-9])" if norm and _WORD.match(norm[0]) else ""
    right = r"(?![a-z0-9])" if norm and _WORD.match(norm[-1]) else ""
    return re.compile(left + re.escape(norm) + right)


def regex_pattern(pattern: str) -> BoundedPattern:
    """An operator's regex over normalised text, on RE2 (linear time); written in Traditional it still matches."""
    return compile_bounded(to_simplified(pattern), ignore_case=True)


@dataclass(frozen=True)
class PhraseMatch:
    """One phrase said: where in the normalised text, and how closely (1.0: exactly)."""

    phrase: str
    start: int
    end: int
    text: str
    similarity: float = 1.0


_normalized = functools.lru_cache(maxsize=4096)(normalize_phrase)


@functools.lru_cache(maxsize=4096)
def _text_tokens(text: str) -> tuple[tuple[Token, ...], frozenset[str]]:
    toks = tuple(tokens(text))
    return toks, frozenset(t.sound for t in toks)


@dataclass(frozen=True)
class Matcher:
    """Compiled phrases and exclusions of one rule."""

    phrases: tuple[tuple[str, BoundedPattern], ...]
    exclude: tuple[BoundedPattern, ...]
    fuzzy: tuple[tuple[str, tuple[Token, ...]], ...] = ()  # phrases long enough for fuzzy matching
    min_similarity: float | None = None
    sound: tuple[tuple[str, SoundPhrase], ...] = ()  # Chinese phrases too short to align: by sound
    exclude_sound: tuple[SoundPhrase, ...] = ()  # Chinese exclusions, which cancel sound-alikes too

    @classmethod
    def for_rule(cls, rule: PhraseRule) -> Matcher:
        literal = rule.kind != "regex"
        compile_one = phrase_pattern if literal else regex_pattern
        fuzzy: tuple[tuple[str, tuple[Token, ...]], ...] = ()
        sound: tuple[tuple[str, SoundPhrase], ...] = ()
        exclude_sound: tuple[SoundPhrase, ...] = ()
        if literal and rule.min_similarity is not None:
            tokenised = ((p, tuple(tokens(normalize_phrase(p)))) for p in rule.phrases)
            fuzzy = tuple((p, toks) for p, toks in tokenised if fuzzy_eligible(list(toks)))
            aligned = {p for p, _ in fuzzy}
            norms = ((p, normalize_phrase(p)) for p in rule.phrases if p not in aligned)
            sound = tuple((p, SoundPhrase.of(n)) for p, n in norms if sound_eligible(n))
            excluded = (normalize_phrase(p) for p in rule.exclude)
            exclude_sound = tuple(SoundPhrase.of(n) for n in excluded if sound_eligible(n))
        return cls(
            phrases=tuple((p, compile_one(p)) for p in rule.phrases),
            exclude=tuple(compile_one(p) for p in rule.exclude),
            fuzzy=fuzzy,
            min_similarity=rule.min_similarity if literal else None,
            sound=sound,
            exclude_sound=exclude_sound,
        )

    def matches(self, text: str) -> list[PhraseMatch]:
        """Every phrase occurrence not cancelled by an exclusion; exact ones, else ones said with
        ASR errors (aligned, or sounding the same)."""
        cancelled = [(m.start(), m.end()) for pattern in self.exclude for m in pattern.finditer(text)]

        def kept(start: int, end: int) -> bool:
            return end > start and not any(a < end and start < b for a, b in cancelled)

        found = [
            PhraseMatch(phrase, m.start(), m.end(), m.group())
            for phrase, pattern in self.phrases
            for m in pattern.finditer(text)
            if kept(m.start(), m.end())
        ]
        if found or self.min_similarity is None:
            return found
        # an exclusion heard as a homophone ("不报本") cancels a longer phrase's sound-alike only:
        # one that merely sounds like the phrase ("白吃" for "白痴") must not cancel its homophones
        heard = [span for phrase in self.exclude_sound for span in phrase.finditer(text)]

        def kept_heard(start: int, end: int) -> bool:
            longer = [(a, b) for a, b in heard if b - a > end - start]
            return kept(start, end) and not any(a < end and start < b for a, b in longer)

        for phrase, sounds in self.sound:
            found += [PhraseMatch(phrase, a, b, text[a:b]) for a, b in sounds.finditer(text) if kept_heard(a, b)]
        for phrase, similarity, start, end in self._alignments(text):
            if similarity >= self.min_similarity and kept_heard(start, end):
                found.append(PhraseMatch(phrase, start, end, text[start:end], round(similarity, 3)))
        return found

    def closest(self, text: str) -> float:
        """The best fuzzy similarity of any phrase in the text (0 when none is plausible)."""
        return max((sim for _, sim, _, _ in self._alignments(text, floor=0.5)), default=0.0)

    def _alignments(self, text: str, floor: float | None = None) -> list[tuple[str, float, int, int]]:
        """Best alignment of each long phrase; a Chinese one must keep one of its characters."""
        threshold = floor if floor is not None else self.min_similarity or 1.0
        toks, sounds = _text_tokens(text)
        out = []
        for phrase, ptoks in self.fuzzy:
            if not plausible(list(ptoks), sounds, threshold):
                continue
            found = best_alignment(list(ptoks), list(toks))
            heard = text[found.start : found.end] if found is not None else ""
            if found is not None and (not any(t.cjk for t in ptoks) or shares_a_character(_normalized(phrase), heard)):
                out.append((phrase, found.similarity, found.start, found.end))
        return out


def _asserted(rule: PhraseRule, p: PreparedSegment, match: PhraseMatch) -> bool:
    """False for a forbidden phrase negated or asked, where the rule ignores those."""
    if not isinstance(rule, ForbiddenPhraseRule) or not (rule.ignore_negated or rule.ignore_questions):
        return True
    start, end = p.norm.original_span(match.start, match.end)
    text = p.segment.text
    if rule.ignore_negated and negated(text, start, end):
        return False
    return not (rule.ignore_questions and asked(text, start, end))


def _finding(
    rule: PhraseRule,
    segs: Sequence[PreparedSegment],
    message: str,
    times: tuple[float, float] | None = None,
    confidence: float | None = None,
) -> Finding:
    start_s, end_s = (
        times if times else (min(p.segment.start_s for p in segs), max(p.segment.end_s for p in segs))
    )
    roles = {p.segment.role for p in segs}
    return Finding(
        rule_id=rule.id,
        kind=rule.kind,
        severity=rule.severity,
        role=roles.pop() if len(roles) == 1 else (rule.role if rule.role != "any" else None),
        start_s=round(start_s, 3),
        end_s=round(end_s, 3),
        evidence=evidence(segs),
        message=message,
        confidence=confidence,
    )


def evaluate_phrases(
    rule: KeywordRule | RegexRule | ForbiddenPhraseRule, matcher: Matcher, ctx: CallContext
) -> list[Finding]:
    """keyword, regex and forbidden_phrase rules."""
    scoped = ctx.scoped(rule)
    hits = [(p, [m for m in matcher.matches(p.norm.text) if _asserted(rule, p, m)]) for p in scoped]
    hits = [(p, found) for p, found in hits if found]
    mode = "any_of" if isinstance(rule, ForbiddenPhraseRule) else rule.match
    label = f"{rule.category} phrase" if isinstance(rule, ForbiddenPhraseRule) else "said"
    if mode == "any_of":
        regex = rule.kind == "regex"
        return [
            _finding(rule, [p], f"{label}: {_quote(found, regex)}", confidence=_confidence(found))
            for p, found in hits
        ]
    if mode == "all_of":
        said = {m.phrase for _, found in hits for m in found}
        if len(said) < len(matcher.phrases):
            return []
        matched = [m for _, found in hits for m in found]
        return [
            _finding(
                rule, [p for p, _ in hits], f"said all of: {_quote_phrases(sorted(said))}",
                confidence=_confidence(matched),
            )
        ]  # fmt: skip
    if hits:  # none_of: satisfied by any phrase
        return []
    return [
        _finding(
            rule,
            [],
            f"none of the {len(matcher.phrases)} phrases said (such as {_quote_phrases(_examples(matcher))})",
            ctx.window(rule),
        )
    ]


def evaluate_disclosure(rule: RequiredDisclosureRule, matcher: Matcher, ctx: CallContext) -> list[Finding]:
    """required_disclosure: the right role must say a phrasing inside the window.

    A phrasing said by the other party, or after the window, is reported as the evidence
    of why the disclosure does not count. A missing disclosure's confidence is lower when
    the right speaker said something close to a phrasing in time (1 - its similarity).
    """
    role = rule.role
    near_misses: list[tuple[str, PreparedSegment, float, float]] = []
    for p in ctx.segments:
        for m in matcher.matches(p.norm.text):
            said_at_s = p.time_at(m.start)
            right_role = ctx.role_matches(role, p.segment.role)
            in_time = ctx.in_window(rule, said_at_s, p.time_at(m.end))
            if right_role and in_time:
                return []
            why = "by the " + p.segment.role if not right_role else "too late"
            near_misses.append((why, p, said_at_s, m.similarity))
    window = _window_text(rule)
    if not near_misses:
        closest = max(
            (matcher.closest(p.norm.text) for p in ctx.scoped(rule) if matcher.min_similarity is not None),
            default=0.0,
        )
        message = f"required disclosure not said {window}"
        if closest > 0:
            message += f" (closest phrasing {closest:.0%} similar)"
        return [_finding(rule, [], message, ctx.window(rule), confidence=round(1.0 - closest, 3))]
    # The right speaker saying it late is the more useful explanation than the other party.
    why, p, said_at_s, similarity = min(near_misses, key=lambda miss: miss[0] != "too late")
    if why == "too late":
        message = f"required disclosure said at {said_at_s:.1f} s, not {window}"
    else:
        message = f"required disclosure said {why}, not by the {role}"
    return [_finding(rule, [p], message, confidence=similarity)]


def _confidence(found: Sequence[PhraseMatch]) -> float:
    return max(m.similarity for m in found)


def _window_text(rule: PhraseRule) -> str:
    if rule.within_first_s is not None:
        return f"within the first {rule.within_first_s:g} s"
    if rule.within_last_s is not None:
        return f"within the last {rule.within_last_s:g} s"
    return "during the call"


def _quote(found: Sequence[PhraseMatch], regex: bool = False) -> str:
    if regex:  # what matched, not the pattern; digits masked since a pattern may catch numbers
        return _quote_phrases(list(dict.fromkeys(_DIGIT.sub("#", m.text) for m in found)))
    return _quote_phrases(list(dict.fromkeys(m.phrase for m in found)))


def _examples(matcher: Matcher, limit: int = 3) -> list[str]:
    return [phrase for phrase, _ in matcher.phrases[:limit]]


def _quote_phrases(phrases: Sequence[str]) -> str:
    return ", ".join(f"“{p}”" for p in phrases)
