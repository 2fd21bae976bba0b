"""The self-contained HTML report over many calls' QA results.

One file, no scripts, no external assets (inline CSS and SVG), so it can be mailed
or archived as is. Evidence in it is the redacted text from the results; the report
never sees unredacted transcripts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pipeline.qa.charts import SEVERITY_COLOURS, hbar_svg, histogram_svg, score_bins
from pipeline.qa.errors import CallTextError
from pipeline.qa.model import SEVERITIES, CallQAResult, Finding
from pipeline.qa.report_template import REPORT_TEMPLATE
from pipeline.qa.rules import RulePack
from pipeline.qa.score import summarize_agents

_ENV = jinja2.Environment(
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
)
_TEMPLATE = _ENV.from_string(REPORT_TEMPLATE)


@dataclass(frozen=True)
class RuleCount:
    rule_id: str
    severity: str
    description: str
    findings: int
    calls: int


@dataclass(frozen=True)
class Totals:
    calls: int
    mean_score: float
    clean_calls: int
    findings: int
    pii_calls: int


def rule_counts(results: Sequence[CallQAResult], pack: RulePack | None = None) -> list[RuleCount]:
    """Per rule: findings and distinct calls, most severe and most frequent first."""
    findings = Counter(f.rule_id for r in results for f in r.findings)
    calls = Counter(rule_id for r in results for rule_id in {f.rule_id for f in r.findings})
    severity = {f.rule_id: f.severity for r in results for f in r.findings}
    counts = []
    for rule_id, n in findings.items():
        rule = pack.rule(rule_id) if pack is not None else None
        counts.append(
            RuleCount(rule_id, severity[rule_id], rule.description if rule else "", n, calls[rule_id])
        )
    rank: dict[str, int] = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    return sorted(counts, key=lambda c: (rank.get(c.severity, 99), -c.findings, c.rule_id))


def totals(results: Sequence[CallQAResult]) -> Totals:
    return Totals(
        calls=len(results),
        mean_score=sum(r.score for r in results) / len(results) if results else 0.0,
        clean_calls=sum(1 for r in results if not r.findings),
        findings=sum(len(r.findings) for r in results),
        pii_calls=sum(1 for r in results if r.pii),
    )


def render_report(
    results: Sequence[CallQAResult],
    *,
    pack: RulePack | None = None,
    title: str = "Call QA report",
    generated_at: datetime | None = None,
    worst_n: int = 10,
) -> str:
    """The report as one HTML document (str)."""
    not_judged = [r for r in results if not r.judged]
    results = [r for r in results if r.judged]  # scores and counts are of the calls rules judged
    counts = rule_counts(results, pack)
    worst = sorted((r for r in results if r.findings), key=lambda r: (r.score, r.call_id))[:worst_n]
    score_chart = histogram_svg(score_bins([r.score for r in results]), "Calls per score band")
    rule_chart = hbar_svg(
        [
            (c.rule_id, c.findings, SEVERITY_COLOURS.get(c.severity, "#3d6fa8"))
            for c in sorted(counts, key=lambda c: -c.findings)
        ],
        "Findings per rule",
    )
    packs = sorted({name for r in results for name in r.rule_packs} | set(pack.names if pack else ()))
    return _TEMPLATE.render(
        title=title,
        generated_at=(generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        packs=", ".join(packs),
        totals=totals(results),
        score_chart=Markup(score_chart),
        rule_chart=Markup(rule_chart),
        rules=counts,
        agents=summarize_agents(results),
        worst=[_call_view(r) for r in worst],
        not_judged=not_judged,
        severity_colours=SEVERITY_COLOURS,
    )


def _call_view(result: CallQAResult) -> dict[str, Any]:
    rank: dict[str, int] = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    findings = sorted(result.findings, key=lambda f: (rank.get(f.severity, 99), f.start_s or 0.0))
    return {
        "call_id": result.call_id,
        "agent_id": result.agent_id,
        "score": result.score,
        "findings": [{**f.__dict__, "when": _when(f)} for f in findings],
    }


def _when(finding: Finding) -> str:
    if finding.start_s is None:
        return ""
    start = f"{int(finding.start_s // 60)}:{finding.start_s % 60:04.1f}"
    if finding.end_s is None:
        return start
    return f"{start}–{int(finding.end_s // 60)}:{finding.end_s % 60:04.1f}"


def write_report(path: str | Path, results: Sequence[CallQAResult], **options: Any) -> Path:
    """Render and write the report (UTF-8); options as for :func:`render_report`."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(results, **options), encoding="utf-8")
    return out


def read_results_jsonl(lines: Iterable[str]) -> list[CallQAResult]:
    """Results from JSON lines (``findings.jsonl`` of the embedded run, or dumped qa.findings)."""
    results = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            results.append(CallQAResult.from_dict(json.loads(line)))
        except (json.JSONDecodeError, CallTextError) as exc:
            raise CallTextError(f"line {number}: {exc}") from exc
    return results
