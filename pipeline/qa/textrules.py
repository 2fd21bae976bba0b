"""Rules over what was said: keyword / regex (any_of, all_of, none_of), forbidden phrases and
required disclosures.

Phrases are normalised like the transcript, so "保證穩賺" matches "保证稳赚" and "No Risk"
matches "no risk". An English phrase must stand on word boundaries ("guaranteed" does not
fire inside "unguaranteed"); Chinese has none to require. An exclusion cancels a match it
overlaps: "不保本" cancels the "保本" inside it, but not a separate "保本" elsewhere.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.qa.context import CallContext, PreparedSegment, evidence
from pipeline.qa.model import Finding
from pipeline.qa.normalize import normalize_phrase, to_simplified
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


def regex_pattern(pattern: str) -> re.Pattern[str]:
    """An operator's regex over normalised text; written in Traditional it still matches."""
    return re.compile(to_simplified(pattern), re.IGNORECASE)


@dataclass(frozen=True)
class Matcher:
    """Compiled phrases and exclusions of one rule."""

    phrases: tuple[tuple[str, re.Pattern[str]], ...]
    exclude: tuple[re.Pattern[str], ...]

    @classmethod
    def for_rule(cls, rule: PhraseRule) -> Matcher:
        literal = rule.kind != "regex"
        compile_one = phrase_pattern if literal else regex_pattern
        return cls(
            phrases=tuple((p, compile_one(p)) for p in rule.phrases),
            exclude=tuple(compile_one(p) for p in rule.exclude),
        )

    def matches(self, text: str) -> list[tuple[str, re.Match[str]]]:
        """(phrase, match) for every phrase occurrence not cancelled by an exclusion."""
        cancelled = [(m.start(), m.end()) for pattern in self.exclude for m in pattern.finditer(text)]
        found = []
        for phrase, pattern in self.phrases:
            for m in pattern.finditer(text):
                if m.end() > m.start() and not any(a < m.end() and m.start() < b for a, b in cancelled):
                    found.append((phrase, m))
        return found


def _finding(
    rule: PhraseRule, segs: Sequence[PreparedSegment], message: str, times: tuple[float, float] | None = None
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
    )


def evaluate_phrases(
    rule: KeywordRule | RegexRule | ForbiddenPhraseRule, matcher: Matcher, ctx: CallContext
) -> list[Finding]:
    """keyword, regex and forbidden_phrase rules."""
    scoped = ctx.scoped(rule)
    hits = [(p, matcher.matches(p.norm.text)) for p in scoped]
    hits = [(p, found) for p, found in hits if found]
    mode = "any_of" if isinstance(rule, ForbiddenPhraseRule) else rule.match
    label = f"{rule.category} phrase" if isinstance(rule, ForbiddenPhraseRule) else "said"
    if mode == "any_of":
        regex = rule.kind == "regex"
        return [_finding(rule, [p], f"{label}: {_quote(found, regex)}") for p, found in hits]
    if mode == "all_of":
        said = {phrase for _, found in hits for phrase, _ in found}
        if len(said) < len(matcher.phrases):
            return []
        return [_finding(rule, [p for p, _ in hits], f"said all of: {_quote_phrases(sorted(said))}")]
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
    of why the disclosure does not count.
    """
    role = rule.role
    near_misses: list[tuple[str, PreparedSegment, float]] = []
    for p in ctx.segments:
        for _, m in matcher.matches(p.norm.text):
            said_at_s = p.time_at(m.start())
            right_role = ctx.role_matches(role, p.segment.role)
            in_time = ctx.in_window(rule, said_at_s, p.time_at(m.end()))
            if right_role and in_time:
                return []
            near_misses.append(("by the " + p.segment.role if not right_role else "too late", p, said_at_s))
    window = _window_text(rule)
    if not near_misses:
        return [_finding(rule, [], f"required disclosure not said {window}", ctx.window(rule))]
    # The right speaker saying it late is the more useful explanation than the other party.
    why, p, said_at_s = min(near_misses, key=lambda miss: miss[0] != "too late")
    if why == "too late":
        message = f"required disclosure said at {said_at_s:.1f} s, not {window}"
    else:
        message = f"required disclosure said {why}, not by the {role}"
    return [_finding(rule, [p], message)]


def _window_text(rule: PhraseRule) -> str:
    if rule.within_first_s is not None:
        return f"within the first {rule.within_first_s:g} s"
    if rule.within_last_s is not None:
        return f"within the last {rule.within_last_s:g} s"
    return "during the call"


def _quote(found: Sequence[tuple[str, re.Match[str]]], regex: bool = False) -> str:
    if regex:  # what matched, not the pattern; digits masked since a pattern may catch numbers
        return _quote_phrases(list(dict.fromkeys(_DIGIT.sub("#", m.group()) for _, m in found)))
    return _quote_phrases(list(dict.fromkeys(phrase for phrase, _ in found)))


def _examples(matcher: Matcher, limit: int = 3) -> list[str]:
    return [phrase for phrase, _ in matcher.phrases[:limit]]


def _quote_phrases(phrases: Sequence[str]) -> str:
    return ", ".join(f"“{p}”" for p in phrases)
