"""Start the whole distributed pipeline locally: router, one worker per bucket, the QA stage (and redaction).

For demos and tests on one machine (each stage is its own process, as in production).
Stops every child on SIGINT/SIGTERM, and everything if one of them dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import Settings
from pipeline.logs import get_logger

log = get_logger("callqa.pipeline")


def stage_commands(settings: Settings, device: str, buckets: list[str] | None = None,
                   redact: bool = False) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "pipeline.cli"]
    commands = {"router": [*cli, "router"], "qa": [*cli, "qa"]}
    if redact:
        commands["redact"] = [*cli, "redact"]
    for bucket in buckets or list(settings.bucket_names):
        commands[f"worker-{bucket}"] = [*cli, "worker", "--bucket", bucket, "--device", device,
                                        "--instance-id", f"local-{device}-{bucket}"]
    return commands


def run_local(settings: Settings, device: str = "cpu", log_dir: Path | None = None,
              buckets: list[str] | None = None, redact: bool = False) -> int:
    log_dir = log_dir or Path(settings.state_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen] = {}
    for index, (name, argv) in enumerate(stage_commands(settings, device, buckets, redact).items()):
        env = None
        if settings.metrics_port:  # one port each on this machine: metrics_port, +1, +2, ...
            env = {**os.environ, "CALLQA_METRICS_PORT": str(settings.metrics_port + index)}
        with open(log_dir / f"{name}.log", "ab") as out:
            procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        log.info("stage_started", stage=name, pid=procs[name].pid, log=str(log_dir / f"{name}.log"),
                 metrics_port=env["CALLQA_METRICS_PORT"] if env else None)
    stop = False

    def request_stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    exit_code = 0
    while not stop:
        dead = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
        if dead:
            log.error("stage_exited", stages=dead)
            exit_code = 1
            break
        time.sleep(0.5)
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    for name, proc in procs.items():
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.info("stage_stopped", stage=name, returncode=proc.returncode)
    return exit_code
