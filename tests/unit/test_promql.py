"""Every PromQL expression deploy/ ships parses, and the group-wide backlog gauges are never summed.

The same expressions run against a real Prometheus scraping real stages in
tests/integration/test_prometheus.py; this is the fast check.
"""

import pytest

from tests.promql import aggregations_of, alert_queries, dashboard_queries, signal

QUERIES = dashboard_queries() + alert_queries()


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_expression_parses(query) -> None:
    import promql_parser

    promql_parser.parse(query.expr)  # raises ValueError("invalid promql query")


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_group_backlog_is_not_summed_over_replicas(query) -> None:
    # Every replica of a stage exports its whole group's backlog: aggregate it per group with max
    # first (summing replicas would count the backlog once per replica).
    for op, by in aggregations_of(query.expr, "callqa_backlog_"):
        assert op in ("max", "min", "avg") and "group" in by, (query.where, op, by)


def test_every_alert_has_a_signal_below_its_threshold() -> None:
    for query in alert_queries():
        assert signal(query.expr) != query.expr.strip(), query.where


def test_kubernetes_rules_are_the_rules_file() -> None:
    from tools import render_monitoring

    assert render_monitoring.main(["--check"]) == 0, "run python -m tools.render_monitoring"


def test_each_alert_asked_for_is_there_with_severity_and_runbook() -> None:
    from tests.promql import alert_rules

    rules = alert_rules()
    assert {r["alert"] for r in rules} == {
        "CallqaGroupStalled",
        "CallqaEtaPastWindowEnd",
        "CallqaDeadLetters",
        "CallqaStageNotLive",
        "CallqaDeviceMemoryNearLimit",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["runbook"], rule["alert"]
        assert 'job="callqa"' in rule["expr"], rule["alert"]  # the scrape job both configs name
