"""One small HTTP server per stage process: ``/metrics`` (Prometheus), ``/healthz``, ``/readyz``.

The paths and the settings (``metrics_host``, ``metrics_port``) are a contract with the
deploy manifests' probes; keep them. Runs in a daemon thread beside the stage's loop.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from pipeline.runtime.health import StageHealth


def _handler(health: StageHealth) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                probe = health.liveness() if path == "/healthz" else health.readiness()
                self._reply(probe.status, json.dumps({"ok": probe.ok, **probe.detail}).encode(), "application/json")
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # probes every few seconds: keep the stage's log clean
            pass

    return Handler


def serve(host: str, port: int, health: StageHealth) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``port=0`` picks a free port (``server.server_port``)."""
    server = ThreadingHTTPServer((host, port), _handler(health))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
