"""A Prometheus server built once from the Go module proxy, scraping stage processes on 127.0.0.1.

Optional, and not part of ``callqa stack up``: the first build takes minutes and a few GB of
memory, and the pipeline itself needs no Prometheus. Tests start one (tests/integration/
test_prometheus.py) to run the dashboard's and the alert rules' PromQL against real scrapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml

from pipeline.errors import StackError
from pipeline.stack.processes import go_binary, start_detached, wait_until

# Prometheus 3.16.0 (its Go module numbers v3.x.y as v0.3xy.0).
PROMETHEUS_VERSION = "v0.316.0"
JOB = "callqa"  # the job name the alert rules select (deploy/prometheus/rules.yaml)


def ensure_binary(cache_dir: Path) -> Path:
    return go_binary(cache_dir, "prometheus", "github.com/prometheus/prometheus/cmd/prometheus", PROMETHEUS_VERSION)


def write_config(home: Path, targets: Sequence[str], interval_s: float = 1.0, rule_files: Sequence[Path] = ()) -> Path:
    """One scrape job, ``callqa``, over ``targets`` (host:port on loopback); rules evaluated as often."""
    if any(not t.startswith(("127.0.0.1:", "localhost:")) for t in targets):
        raise StackError(f"the local Prometheus scrapes loopback targets only, got {list(targets)}")
    interval = f"{int(interval_s * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": list(targets)}]}],
    }
    home.mkdir(parents=True, exist_ok=True)
    path = home / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def start(
    binary: Path, home: Path, port: int, config: Path, on_started: Callable[[int], None] = lambda pid: None
) -> int:
    log = home / "server.log"
    pid = start_detached(
        [
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=2h",
        ],
        log,
    )
    on_started(pid)  # recorded before the wait: a server that never gets ready can still be stopped
    api = PrometheusApi(port)
    try:
        wait_until(api.ready, "Prometheus", timeout_s=60, pid=pid, log=log)
    finally:
        api.close()
    return pid


@dataclass(frozen=True)
class QueryResult:
    ok: bool
    series: list[dict[str, Any]]  # [{"metric": {...}, "value": [t, "v"]}] for a vector
    error: str | None


class PrometheusApi:
    """The few HTTP API calls the tests make: readiness, instant queries, targets, rules, alerts."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=2, read=30), retries=urllib3.Retry(total=0))

    def ready(self) -> bool:
        try:
            return self.http.request("GET", f"{self.base}/-/ready").status == 200
        except urllib3.exceptions.HTTPError:
            return False

    def query(self, expr: str) -> QueryResult:
        """An instant query; a bad expression is an error result (Prometheus answers 400 bad_data)."""
        reply = self.http.request("GET", f"{self.base}/api/v1/query", fields={"query": expr})
        body = json.loads(reply.data)
        if body.get("status") != "success":
            return QueryResult(False, [], f"{body.get('errorType')}: {body.get('error')}")
        data = body["data"]
        series = data["result"] if data["resultType"] in ("vector", "matrix") else [{"value": data["result"]}]
        return QueryResult(True, series, None)

    def _data(self, path: str) -> Any:
        body = json.loads(self.http.request("GET", f"{self.base}{path}").data)
        if body.get("status") != "success":
            raise StackError(f"Prometheus {path}: {body.get('error')}")
        return body["data"]

    def targets(self) -> list[dict[str, Any]]:
        return list(self._data("/api/v1/targets")["activeTargets"])

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self._data("/api/v1/rules")["groups"] for rule in group["rules"]]

    def alerts(self) -> list[dict[str, Any]]:
        return list(self._data("/api/v1/alerts")["alerts"])

    def close(self) -> None:
        self.http.clear()
