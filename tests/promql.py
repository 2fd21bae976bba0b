"""The PromQL that deploy/ ships: every dashboard target and every alert rule, and each one's signal.

An alert's *signal* is its expression with the top-level threshold taken off (``A > 0.9`` -> ``A``;
``A unless B`` -> ``A``'s signal; ``A or B`` -> both signals): a quiet pipeline makes few alerts true, but each alert's signal
must still return series from a real scrape, or the alert can never fire.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import promql_parser
import yaml

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "callqa-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
COMPARISONS = {">", "<", ">=", "<=", "==", "!="}


@dataclass(frozen=True)
class Query:
    where: str  # "panel 2 A" or "alert CallqaEtaPastWindowEnd #3"
    expr: str


def dashboard_queries() -> list[Query]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [Query(f"panel {p['id']} {t['refId']} ({p['title']})", t["expr"]) for p in panels for t in p["targets"]]


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def alert_queries() -> list[Query]:
    return [Query(f"alert {r['alert']} #{i}", r["expr"]) for i, r in enumerate(alert_rules())]


def signal(expr: str) -> str:
    """The expression without its top-level threshold (see the module docstring)."""
    node = promql_parser.parse(expr)
    while True:
        if isinstance(node, promql_parser.ParenExpr):
            node = node.expr
        elif isinstance(node, promql_parser.BinaryExpr) and str(node.op) in COMPARISONS | {"unless", "and"}:
            node = node.lhs
        elif isinstance(node, promql_parser.BinaryExpr) and str(node.op) == "or":
            return f"({signal(str(node.lhs))}) or ({signal(str(node.rhs))})"
        else:
            return str(node)


def aggregations_of(expr: str, metric_prefix: str) -> list[tuple[str, list[str]]]:
    """(operator, ``by`` labels) of each aggregation applied directly to a metric named ``metric_prefix*``."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: object) -> None:
        if not isinstance(node, promql_parser.AggregateExpr):
            return
        inner = node.expr
        while isinstance(inner, promql_parser.ParenExpr):
            inner = inner.expr
        if isinstance(inner, promql_parser.VectorSelector) and (inner.name or "").startswith(metric_prefix):
            by = list(node.modifier.labels) if node.modifier and "By" in str(node.modifier.type) else []
            found.append((str(node.op), by))

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return found
