"""The Grafana dashboard reads only metrics the stages export (a renamed metric breaks this test)."""

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import pipeline.run.qa_step  # noqa: F401 - the Faust stages' metrics, defined beside their per-event step
import pipeline.run.router_step  # noqa: F401
import pipeline.run.worker_metrics  # noqa: F401
import pipeline.runtime.endpoint  # noqa: F401 - registers the ops metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "callqa-dashboard.json"


def test_every_queried_metric_exists() -> None:
    exported = {s.name for m in REGISTRY.collect() for s in m.samples} | {m.name for m in REGISTRY.collect()}
    exported |= {f"{n}{suffix}" for n in list(exported) for suffix in ("_bucket", "_total")}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queried = {name for p in panels for t in p["targets"] for name in re.findall(r"\bcallqa_[a-z_]+", t["expr"])}
    assert queried and queried <= exported, queried - exported
    assert {p["title"].split(" ")[0] for p in panels} >= {"Backlog", "ETA", "RTFx", "Padding", "Batch", "Dead",
                                                          "Device", "Group"}
