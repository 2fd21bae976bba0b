"""Run callqa commands as real processes against the test stack (so they can be killed for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import Settings

ROOT = Path(__file__).resolve().parent.parent


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLQA_")}
    env.update({
        "CALLQA_STATE_DIR": str(settings.state_dir),
        "CALLQA_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CALLQA_S3_ENDPOINT": settings.s3_endpoint,
        "CALLQA_S3_ACCESS_KEY": settings.s3_access_key,
        "CALLQA_S3_SECRET_KEY": settings.s3_secret_key.get_secret_value(),
        "CALLQA_RECORDINGS_BUCKET": settings.recordings_bucket,
        "CALLQA_TOPIC_PREFIX": settings.topic_prefix,
        "CALLQA_ARRIVALS_TOPIC": settings.arrivals,
        "CALLQA_MAX_DURATION_S": str(settings.max_duration_s),
        "CALLQA_LOG_FORMAT": "json",
    })
    if settings.topic_partitions:
        env["CALLQA_TOPIC_PARTITIONS"] = json.dumps(settings.topic_partitions)
    env.update({f"CALLQA_{k.upper()}": v for k, v in extra.items()})
    return env


def callqa(settings: Settings, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=settings_env(settings, **extra),
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def spawn(settings: Settings, log: Path, *args: str, **extra: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], env=settings_env(settings, **extra),
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_line(log: Path, text: str, timeout_s: float, poll_s: float = 0.5) -> bool:
    """Whether ``text`` appears in a process's log within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        time.sleep(poll_s)
    return False
