"""Compliance QA: rule packs, PII detection and redaction, conversation metrics, scores, report.

Pure logic, no Kafka. The public API::

    pack = load_packs(["ops/my-pack.yaml"])            # default pack + operators' packs
    engine = QAEngine(pack)
    result = engine.evaluate(transcript)               # CallText or any Transcript-like object
    result.to_dict()                                   # fields of the qa.findings event
    html = render_report(results, pack=pack)           # self-contained HTML
"""

from pipeline.numbers.model import SegmentText
from pipeline.qa.engine import QAEngine, evaluate_call
from pipeline.qa.errors import CallTextError, QAError, RulePackError
from pipeline.qa.model import CallQAResult, CallText, Finding, PIISpan, call_text_from
from pipeline.qa.report import read_results_jsonl, render_report, write_report
from pipeline.qa.rules import RulePack, default_pack_path, load_packs
from pipeline.qa.score import AgentSummary, score_findings, summarize_agents

__all__ = [
    "AgentSummary",
    "CallQAResult",
    "CallText",
    "CallTextError",
    "Finding",
    "PIISpan",
    "QAEngine",
    "QAError",
    "RulePack",
    "RulePackError",
    "SegmentText",
    "call_text_from",
    "default_pack_path",
    "evaluate_call",
    "load_packs",
    "read_results_jsonl",
    "render_report",
    "score_findings",
    "summarize_agents",
    "write_report",
]
