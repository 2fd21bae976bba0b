"""The QA engine: one call's transcript in, findings + score + redacted transcript out.

Pure and synchronous (no Kafka, no I/O): the Faust agent and the embedded runner both
call :meth:`QAEngine.evaluate`. PII is detected and redacted on every call whatever the
rules say, because the copy published downstream must never carry it; ``pii`` rules
only decide which of those spans are also compliance findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.numbers.backstop import fail_closed
from pipeline.numbers.model import PIIType, SegmentText
from pipeline.numbers.pii import PII_TYPES, UNCHECKED_TYPES, PIIHit, find_pii
from pipeline.qa import metrics
from pipeline.qa.context import KNOWN_ROLES, CallContext, evidence, normalize_all, prepare
from pipeline.qa.model import CallQAResult, CallText, Finding, PIISpan, call_text_from
from pipeline.qa.rules import (
    LongSilenceRule,
    PIIRule,
    RulePack,
    SpeechRateRule,
    TalkOverRule,
    TalkRatioRule,
    load_packs,
)
from pipeline.qa.score import score_findings
from pipeline.qa.textrules import Matcher, evaluate_disclosure, evaluate_phrases, phrase_pattern

HOLD_ANNOUNCE_GAP_S = 10.0  # "请稍等" … "好的" … silence: still an announced hold
_PHRASE_KINDS = ("keyword", "regex", "forbidden_phrase", "required_disclosure")


class QAEngine:
    """Evaluates calls against a rule pack. Build once (it compiles the rules), reuse for every call."""

    def __init__(self, pack: RulePack, *, redact_types: Sequence[PIIType] = PII_TYPES) -> None:
        self.pack = pack
        self.redact_types = tuple(redact_types)
        self._matchers = {r.id: Matcher.for_rule(r) for r in pack.rules if r.kind in _PHRASE_KINDS}
        self._evaluators: dict[str, Callable[[Any, CallContext], list[Finding]]] = {
            "keyword": self._phrases,
            "regex": self._phrases,
            "forbidden_phrase": self._phrases,
            "required_disclosure": self._disclosure,
            "pii": _pii_rule,
            "long_silence": _long_silence,
            "talk_over": _talk_over,
            "speech_rate": _speech_rate,
            "talk_ratio": _talk_ratio,
        }

    @classmethod
    def from_paths(cls, paths: Sequence[str | Path] = (), *, include_default: bool = True) -> QAEngine:
        """Engine over the default pack (unless excluded) plus the operator's pack files."""
        return cls(load_packs(paths, include_default=include_default))

    def evaluate(self, call: CallText | Any) -> CallQAResult:
        """Findings, score and redacted segments of one call (a CallText or any Transcript-like object)."""
        source = call
        if not isinstance(call, CallText):
            call = call_text_from(call)
        norms = normalize_all(call)
        found = find_pii(call.segments, norms, self.redact_types)
        # the worker's fail-closed backstop too: a transcript may reach QA unredacted (raw, or from 1.0)
        redacted = fail_closed(call.segments, norms, found).texts
        hits = found + _masked_before(source, call.segments, found)
        ctx = prepare(call, redacted, norms, hits)
        foreign = metrics.unsupported_language(call)
        findings: list[Finding] = []
        for rule in self.pack.rules if foreign is None else ():  # rules in other languages judge nothing
            if not ctx.has_speech and _judges_absence(rule):
                continue  # nothing was said, so nothing was left unsaid: the dead-air finding says it
            if not ctx.roles_known and rule.unknown_speaker == "skip":
                continue
            findings.extend(_with_role_confidence(f, rule, ctx) for f in self._evaluators[rule.kind](rule, ctx))
        findings.sort(key=lambda f: (f.start_s if f.start_s is not None else -1.0, f.rule_id))
        return CallQAResult(
            call_id=call.call_id,
            no_speech=not ctx.has_speech,
            agent_id=call.agent_id,
            score=score_findings(findings, self.pack) if foreign is None else 0.0,
            judged=foreign is None,
            unsupported_language=foreign,
            findings=tuple(findings),
            pii=tuple(PIISpan(h.type, h.role, h.start_s, h.end_s, h.confidence) for h in hits),
            redacted_segments=tuple(
                SegmentText(s.role, s.channel, s.start_s, s.end_s, text, s.role_confidence)
                for s, text in zip(call.segments, redacted, strict=True)
            ),
            rule_packs=self.pack.names,
        )

    def _phrases(self, rule: Any, ctx: CallContext) -> list[Finding]:
        return evaluate_phrases(rule, self._matchers[rule.id], ctx)

    def _disclosure(self, rule: Any, ctx: CallContext) -> list[Finding]:
        return evaluate_disclosure(rule, self._matchers[rule.id], ctx)


def _masked_before(source: Any, segments: Sequence[SegmentText], found: Sequence[PIIHit]) -> list[PIIHit]:
    """The numbers a worker masked before publishing (a redacted Transcript lists them in ``pii``):
    its text no longer holds them, so they are taken from that list, each covering the segments
    of its speaker it overlaps. Numbers the text still shows (found again) are not doubled."""
    if not getattr(source, "redacted", False):
        return []
    out = []
    for span in getattr(source, "pii", None) or []:
        if span.type not in PII_TYPES:  # a run only the backstop masked: no kind for a rule to judge
            continue
        if any(h.type == span.type and h.start_s < span.end_s and span.start_s < h.end_s for h in found):
            continue
        parts = tuple((i, 0, len(s.text)) for i, s in enumerate(segments)
                      if s.role == span.role and s.start_s < span.end_s and span.start_s < s.end_s)
        out.append(PIIHit(span.type, span.role, span.start_s, span.end_s, parts,
                          getattr(span, "confidence", 1.0)))
    return out


def _judges_absence(rule: Any) -> bool:
    """Rules that flag what was not said (a disclosure, a none_of keyword)."""
    return rule.kind == "required_disclosure" or getattr(rule, "match", None) == "none_of"


def _metric_finding(
    rule: Any, start_s: float | None, end_s: float | None, message: str, role: str | None = None
) -> Finding:
    return Finding(
        rule_id=rule.id,
        kind=rule.kind,
        severity=rule.severity,
        role=role,
        start_s=None if start_s is None else round(start_s, 3),
        end_s=None if end_s is None else round(end_s, 3),
        evidence="",
        message=message,
    )


def _pii_rule(rule: PIIRule, ctx: CallContext) -> list[Finding]:
    """Each number of the rule's types said in scope. Where no one knows who spoke (a mono call),
    a number said once is most likely the customer's own, so an agent-scoped rule takes only a
    number of a type said before in the call: the agent reading it back."""
    findings = []
    for hit in ctx.pii:
        if (
            hit.type in rule.types
            and ctx.role_matches(rule.role, hit.role, rule.unknown_speaker)
            and ctx.in_window(rule, hit.start_s, hit.end_s)
        ):
            read_back_only = rule.role == "agent" and hit.role not in KNOWN_ROLES
            if read_back_only and not any(h.type == hit.type and h.end_s <= hit.start_s for h in ctx.pii):
                continue
            segs = [ctx.segments[idx] for idx in dict.fromkeys(idx for idx, _, _ in hit.parts)]
            why = "no check exists" if hit.type in UNCHECKED_TYPES else "checksum failed"
            what = hit.type if hit.confidence >= 1.0 else f"likely {hit.type} ({why})"
            if hit.role in KNOWN_ROLES:
                who = f"spoken by the {hit.role}"
            elif read_back_only:
                who = "spoken again after the same kind of number earlier in the call (a read-back; mono recording)"
            else:
                who = "spoken (mono recording: speaker not known)"
            finding = _metric_finding(rule, hit.start_s, hit.end_s, f"{what} {who}", hit.role)
            findings.append(_with(finding, evidence=evidence(segs), confidence=hit.confidence))
    return findings


def _with(finding: Finding, **changes: Any) -> Finding:
    return Finding(**{**finding.__dict__, **changes})


def _with_role_confidence(finding: Finding, rule: Any, ctx: CallContext) -> Finding:
    """A role-scoped finding on a separated mono call is only as sure as the role of the speech it
    quotes: its confidence is at most the least sure role_confidence among the rule's-role segments
    it overlaps (findings on stereo calls, whose roles are the channels', are unchanged)."""
    if rule.role == "any" or finding.start_s is None or finding.end_s is None:
        return finding
    start, end = finding.start_s, finding.end_s
    sure = [
        p.segment.role_confidence
        for p in ctx.segments
        if p.segment.role == rule.role and p.segment.role_confidence is not None
        and p.segment.start_s <= end and start <= p.segment.end_s
    ]
    if not sure:
        return finding
    least = min(sure)
    return _with(finding, confidence=round(min(least, finding.confidence if finding.confidence is not None else 1.0), 3))


def _long_silence(rule: LongSilenceRule, ctx: CallContext) -> list[Finding]:
    if not ctx.has_speech:
        if ctx.call.duration_s <= 0:
            return []
        message = f"no speech in the whole call ({ctx.call.duration_s:.1f} s): it may not have connected"
        return [_metric_finding(rule, 0.0, ctx.call.duration_s, message)]
    holds = [phrase_pattern(p) for p in rule.hold_phrases]
    findings = []
    if rule.max_edge_silence_s is not None:
        for start, end, where in metrics.edge_silences(ctx.call, rule.max_edge_silence_s):
            if ctx.in_window(rule, start, end):
                message = f"no speech for {end - start:.1f} s {where} (limit {rule.max_edge_silence_s:g} s)"
                findings.append(_metric_finding(rule, start, end, message))
    for start, end in metrics.silences(ctx.call, rule.max_silence_s):
        if not ctx.in_window(rule, start, end):
            continue
        if _announced_hold(holds, start, ctx):
            if rule.max_hold_s is None or end - start <= rule.max_hold_s:
                continue
            message = f"hold of {end - start:.1f} s (limit {rule.max_hold_s:g} s for an announced hold)"
        else:
            message = f"no speech for {end - start:.1f} s (limit {rule.max_silence_s:g} s)"
        findings.append(_metric_finding(rule, start, end, message))
    return findings


def _announced_hold(holds: Sequence[re.Pattern[str]], gap_start_s: float, ctx: CallContext) -> bool:
    """Did the agent's last words before the gap (allowing a customer's "OK") announce a hold?"""
    agent_before = [
        p
        for p in ctx.segments
        if p.segment.end_s <= gap_start_s and ctx.role_matches("agent", p.segment.role)
    ]
    if not agent_before or gap_start_s - agent_before[-1].segment.end_s > HOLD_ANNOUNCE_GAP_S:
        return False
    return any(h.search(agent_before[-1].norm.text) for h in holds)


def _talk_over(rule: TalkOverRule, ctx: CallContext) -> list[Finding]:
    return [
        _metric_finding(
            rule,
            start,
            end,
            f"both parties speaking for {end - start:.1f} s (limit {rule.max_overlap_s:g} s)",
        )
        for start, end in metrics.overlaps(ctx.call, rule.max_overlap_s, rule.bridge_pause_s)
        if ctx.in_window(rule, start, end)
    ]


def _speech_rate(rule: SpeechRateRule, ctx: CallContext) -> list[Finding]:
    if not ctx.roles_known and rule.role != "any":
        return []  # mixed speech: the agent's rate cannot be told apart
    segs = [p.segment for p in ctx.scoped(rule)]
    findings = []
    for lang, sample in sorted(metrics.speech_rates(ctx.call, segs).items()):
        bounds = rule.bounds.get(lang)
        if bounds is None or sample.speech_s < rule.min_speech_s:
            continue
        unit = "chars/min" if lang == "zh" else "words/min"
        rate = sample.per_min
        if bounds.min_per_min is not None and rate < bounds.min_per_min:
            message = f"{rule.role} speech rate {rate:.0f} {unit} below {bounds.min_per_min:g}"
        elif bounds.max_per_min is not None and rate > bounds.max_per_min:
            message = f"{rule.role} speech rate {rate:.0f} {unit} above {bounds.max_per_min:g}"
        else:
            continue
        lang_segs = [s for s in segs if metrics.segment_language(ctx.call, s) == lang]
        findings.append(_metric_finding(rule, lang_segs[0].start_s, lang_segs[-1].end_s, message, rule.role))
    return findings


def _talk_ratio(rule: TalkRatioRule, ctx: CallContext) -> list[Finding]:
    if not ctx.roles_known:
        return []
    # Both parties' speech in the window: the rule's role only says whose share is judged.
    segs = [p.segment for p in ctx.segments if ctx.in_window(rule, p.segment.start_s, p.segment.end_s)]
    measured = metrics.talk_ratio(ctx.call, segs)
    if measured is None or measured[1] < rule.min_speech_s:
        return []
    ratio = measured[0] if rule.role != "customer" else 1.0 - measured[0]
    who = "customer" if rule.role == "customer" else "agent"
    start_s, end_s = ctx.window(rule)
    if rule.min_ratio is not None and ratio < rule.min_ratio:
        return [
            _metric_finding(
                rule, start_s, end_s, f"{who} talk ratio {ratio:.0%} below {rule.min_ratio:.0%}", who
            )
        ]
    if rule.max_ratio is not None and ratio > rule.max_ratio:
        return [
            _metric_finding(
                rule, start_s, end_s, f"{who} talk ratio {ratio:.0%} above {rule.max_ratio:.0%}", who
            )
        ]
    return []


def evaluate_call(call: Any, pack: RulePack) -> CallQAResult:
    """One-shot convenience; prefer a long-lived :class:`QAEngine` in a stream."""
    return QAEngine(pack).evaluate(call)
