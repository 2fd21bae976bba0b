"""The per-call score and per-agent aggregates.

A call starts at 100 and each rule takes off its weight once per finding, up to its
``max_penalties`` findings (so one rude word is not scored like ten, unless the pack
says so); the score never goes below 0. Findings of rules the pack does not know
(results read back from an older run) cost their severity's default weight.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.qa.model import CallQAResult, Finding
from pipeline.qa.rules import _DEFAULT_WEIGHT, RulePack

MAX_SCORE = 100.0


def score_findings(findings: Iterable[Finding], pack: RulePack | None = None) -> float:
    """100 minus the weighted findings, clamped to [0, 100]."""
    counts = Counter(f.rule_id for f in findings)
    severities = {f.rule_id: f.severity for f in findings} if counts else {}
    penalty = 0.0
    for rule_id, count in counts.items():
        rule = pack.rule(rule_id) if pack is not None else None
        if rule is None:
            penalty += _DEFAULT_WEIGHT[severities[rule_id]] * count
        else:
            penalty += rule.points * min(count, rule.max_penalties)
    return round(max(0.0, MAX_SCORE - penalty), 2)


@dataclass(frozen=True)
class AgentSummary:
    """One agent's calls in a report."""

    agent_id: str
    calls: int
    mean_score: float
    min_score: float
    findings: int
    calls_with_findings: int
    pii_spans: int


UNKNOWN_AGENT = "(unknown)"


def summarize_agents(results: Sequence[CallQAResult]) -> list[AgentSummary]:
    """Per-agent aggregates, worst mean score first."""
    by_agent: dict[str, list[CallQAResult]] = {}
    for result in results:
        if not result.judged:
            continue  # no rule could judge it: its 0 says so to readers of 1.1, it is no agent's score
        by_agent.setdefault(result.agent_id or UNKNOWN_AGENT, []).append(result)
    summaries = [
        AgentSummary(
            agent_id=agent,
            calls=len(calls),
            mean_score=round(sum(c.score for c in calls) / len(calls), 2),
            min_score=min(c.score for c in calls),
            findings=sum(len(c.findings) for c in calls),
            calls_with_findings=sum(1 for c in calls if c.findings),
            pii_spans=sum(len(c.pii) for c in calls),
        )
        for agent, calls in by_agent.items()
    ]
    return sorted(summaries, key=lambda s: (s.mean_score, s.agent_id))
