"""A real Prometheus scrapes a real router, ASR worker and QA stage; the shipped PromQL runs on it.

Every dashboard target and every alert rule (deploy/grafana, deploy/prometheus/rules.yaml) must be
accepted by Prometheus and return series. Alerts whose condition the test makes true cheaply are
checked true: dead letters over the rate (13 bad recordings) and a stage not live (QA stopped).
The others (a group stalled, ETA past the window end, device memory near the limit) are checked
through their signal, the expression below its threshold, which must return series; Prometheus
itself evaluates every rule (rules loaded) without error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import soundfile as sf

from pipeline.config import Settings
from pipeline.stack import prometheus
from pipeline.stack.processes import free_port, stop
from tests.processes import callqa, spawn
from tests.processes import stop as stop_proc
from tests.promql import RULES, alert_rules, dashboard_queries, signal
from tools.make_sample_calls import make_call

pytestmark = pytest.mark.integration

STAGES = ("router", "worker", "qa")
CORRUPT = b"RIFF\x24\x00\x00\x00WAVEjunkjunkjunk" * 4  # the router dead-letters it (corrupt header)
LINES = [
    ("Hello, my name is Anna. This call is recorded.", "I would like to check my balance."),
    ("Thank you for calling the bank.", "I want to change my address."),
    ("Your payment has been received.", "Thank you very much, goodbye."),
]


@pytest.fixture(scope="module")
def scraper(stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """Prometheus (1 s scrapes and rule evaluations, the shipped rules) over one port per stage."""
    binary = prometheus.ensure_binary(stack_settings.cache_dir)  # first run builds it (minutes)
    home = tmp_path_factory.mktemp("prometheus")
    ports = {name: free_port() for name in STAGES}
    config = prometheus.write_config(home, [f"127.0.0.1:{p}" for p in ports.values()], 1.0, [RULES])
    pids: list[int] = []
    port = free_port()
    try:
        prometheus.start(binary, home, port, config, on_started=pids.append)
        api = prometheus.PrometheusApi(port)
        yield api, ports
        api.close()
    finally:
        for pid in pids:
            stop(pid, str(home))


def wait_for(what: str, check: Callable[[], object], timeout_s: float, poll_s: float = 1.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(poll_s)
    raise AssertionError(f"not seen within {timeout_s:.0f}s: {what}")


def write_calls(folder: Path, names: list[str], corrupt: int) -> Path:
    folder.mkdir()
    for name, (agent, customer) in zip(names, LINES, strict=False):
        stereo, _ = make_call([("agent", agent), ("customer", customer)])
        sf.write(folder / f"{name}.wav", stereo, 8000, subtype="ULAW")
    for i in range(corrupt):
        (folder / f"corrupt-{folder.name}-{i:02d}.wav").write_bytes(CORRUPT)
    return folder


def test_dashboard_and_alerts_on_real_scrapes(settings: Settings, scraper, unique: str, tmp_path: Path) -> None:
    api, ports = scraper
    procs = {}
    try:
        for name, args in {
            "router": ("router", "--app-id", f"router-{unique}"),
            "worker": (
                "worker",
                "--bucket",
                "short",
                "--device",
                "cpu",
                "--instance-id",
                f"w-{unique}",
                "--max-calls",
                "1",
            ),
            "qa": ("qa", "--app-id", f"qa-{unique}"),
        }.items():
            procs[name] = spawn(
                settings,
                tmp_path / f"{name}.log",
                *args,
                asr_threads="1",
                metrics_port=str(ports[name]),
                backlog_interval_s="1",
            )
        wait_for("all three stages scraped", lambda: sum(t["health"] == "up" for t in api.targets()) == 3, 300)

        # Wave 1 creates the counters' series; wave 2 moves them, so rates and increases see it.
        ingest(settings, write_calls(tmp_path / "wave1", ["call-a"], corrupt=1))
        wait_for("first transcript counted", lambda: series(api, "callqa_asr_calls_total > 0"), 300)
        wait_for("first dead letter scraped", lambda: series(api, "callqa_router_dead_lettered_total"), 60)
        ingest(settings, write_calls(tmp_path / "wave2", ["call-b", "call-c"], corrupt=12))
        wait_for("three calls through QA", lambda: series(api, "callqa_qa_calls_total >= 3"), 300)
        wait_for("13 dead letters scraped", lambda: series(api, "sum(callqa_router_dead_lettered_total) >= 13"), 60)
        time.sleep(3)  # a few more scrapes and rule evaluations after the last change

        bad = {}
        for q in dashboard_queries():
            result = api.query(q.expr)
            if not (result.ok and result.series):
                bad[q.where] = result.error or "no series"
        rules = alert_rules()
        for i, rule in enumerate(rules):
            where = f"alert {rule['alert']} #{i}"
            full, sig = api.query(rule["expr"]), api.query(signal(rule["expr"]))
            if not full.ok:
                bad[where] = full.error
            elif not (sig.ok and sig.series):
                bad[where + " signal"] = sig.error or f"no series: {signal(rule['expr'])}"
        assert not bad, bad

        # Made true: more than 10 dead letters an hour for one reason.
        dead_expr = next(
            r["expr"] for r in rules if r["alert"] == "CallqaDeadLetters" and r["labels"]["stage"] == "router"
        )
        router_dead = api.query(dead_expr)
        assert [s["metric"].get("reason") for s in router_dead.series] == ["corrupt_header"], api.query(
            signal(dead_expr)
        ).series
        # The memory ratio is a share of a real limit, not 0 or past 1.
        memory = api.query(signal(next(r["expr"] for r in rules if r["alert"] == "CallqaDeviceMemoryNearLimit")))
        assert all(0 < float(s["value"][1]) < 1 for s in memory.series), memory
        # Prometheus evaluated every rule itself, without error.
        wait_for("every rule evaluated", lambda: all(r["health"] != "unknown" for r in api.rules()), 30)
        assert [(r["name"], r.get("lastError")) for r in api.rules() if r["health"] != "ok"] == []

        # Made true: a stage not live once it stops.
        stop_proc(procs.pop("qa"))
        qa_target = f"127.0.0.1:{ports['qa']}"
        wait_for(
            "CallqaStageNotLive for the stopped QA stage",
            lambda: [
                a
                for a in api.alerts()
                if a["labels"]["alertname"] == "CallqaStageNotLive" and a["labels"].get("instance") == qa_target
            ],
            30,
        )
        assert {a["labels"]["instance"] for a in api.alerts() if a["labels"]["alertname"] == "CallqaStageNotLive"} == {
            qa_target
        }
    finally:
        for proc in procs.values():
            stop_proc(proc)


def ingest(settings: Settings, folder: Path) -> None:
    result = callqa(settings, "ingest", str(folder), "--roles", "left=agent,right=customer", "--agent-id", "a-1")
    assert result.returncode == 0, result.stderr


def series(api: prometheus.PrometheusApi, expr: str) -> list:
    result = api.query(expr)
    assert result.ok, result.error
    return result.series
