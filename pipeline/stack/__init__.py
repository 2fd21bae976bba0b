"""The local stack: one Kafka broker and one MinIO server on 127.0.0.1, for development and tests.

``up`` resolves the cached binaries, picks free ports (or the ones given), starts both
servers, waits for readiness, applies the topic catalog, prepares the recordings
bucket and writes ``<state_dir>/stack.env`` (the connection settings every other
command reads). ``down`` stops only the processes it started; ``status`` reports.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.catalog import settings_catalog
from pipeline.config import STACK_ENV_FILE, Settings, write_env_file
from pipeline.errors import StackError
from pipeline.stack import kafka
from pipeline.stack.processes import alive, free_port, port_open, stop

STATE_FILE = "stack.json"
PIDS_FILE = "pids.json"  # each server's pid, written the moment it starts


@dataclass(frozen=True)
class StackState:
    state_dir: str
    kafka_pid: int
    kafka_port: int
    controller_port: int
    minio_pid: int
    minio_port: int
    console_port: int
    started_at: float
    timings_s: dict[str, float]
    sasl_port: int | None = None  # the optional SASL_PLAINTEXT (SCRAM) listener, off by default
    sasl_mechanism: str | None = None

    @property
    def marker(self) -> str:
        return self.state_dir


def _load_state(state_dir: Path) -> StackState | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    return StackState(**json.loads(path.read_text()))


def up(settings: Settings, kafka_port: int | None = None, minio_port: int | None = None,
       scram_user: kafka.ScramUser | None = None) -> StackState:
    """Start the stack. With ``scram_user`` the broker gets a second listener, SASL_PLAINTEXT with
    SCRAM, and that user (``StackState.sasl_port``); off by default, as for ``callqa stack up``."""
    # The clients load here, not at import: `callqa stack status` and the stack's helpers need neither.
    from pipeline.stack import minio

    state_dir = settings.state_dir.resolve()
    existing = _load_state(state_dir)
    if existing and alive(existing.kafka_pid) and alive(existing.minio_pid):
        return existing
    if existing:
        down(settings)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    libs = kafka.ensure_jars(settings.cache_dir)
    minio_binary = minio.ensure_binary(settings.cache_dir)
    timings["binaries_s"] = time.monotonic() - t0

    kafka_port = kafka_port or free_port()
    controller_port, minio_port, console_port = free_port(), minio_port or free_port(), free_port()
    for port in (kafka_port, minio_port):
        if port_open(port):
            raise StackError(f"port {port} is already in use on 127.0.0.1")
    t1 = time.monotonic()
    try:
        state = _start_servers(settings, state_dir, libs, minio_binary, kafka_port, controller_port,
                               minio_port, console_port, timings, t0, t1, scram_user)
    except BaseException:
        down(settings)  # a failed up leaves nothing running: the pids were recorded as each server started
        raise
    return state


def _record_pid(state_dir: Path, name: str, pid: int) -> None:
    path = state_dir / PIDS_FILE
    pids = json.loads(path.read_text()) if path.exists() else {}
    pids[name] = pid
    path.write_text(json.dumps(pids))


def _start_servers(settings: Settings, state_dir: Path, libs: Path, minio_binary: Path, kafka_port: int,
                   controller_port: int, minio_port: int, console_port: int, timings: dict[str, float],
                   t0: float, t1: float, scram_user: kafka.ScramUser | None = None) -> StackState:
    from pipeline.adapters.kafka_admin import apply_catalog, wait_for_broker
    from pipeline.adapters.minio_store import storage_client
    from pipeline.stack import minio

    state_dir.mkdir(parents=True, exist_ok=True)
    sasl_port = free_port() if scram_user else None
    kafka_pid = kafka.start(libs, state_dir / "kafka", kafka_port, controller_port,
                            on_started=lambda pid: _record_pid(state_dir, "kafka", pid),
                            sasl_port=sasl_port, scram_user=scram_user,
                            sasl_mechanism=scram_user.mechanism if scram_user else "SCRAM-SHA-256")
    bootstrap = f"127.0.0.1:{kafka_port}"
    conn = settings.model_copy(update={"kafka_bootstrap": bootstrap, "s3_endpoint": f"127.0.0.1:{minio_port}"})
    wait_for_broker(conn)
    # The arrivals topic must exist before MinIO connects to publish onto it.
    apply_catalog(conn, settings_catalog(settings))
    timings["kafka_s"] = time.monotonic() - t1
    t2 = time.monotonic()
    minio_pid = minio.start(
        minio_binary, state_dir / "minio", minio_port, console_port,
        settings.s3_access_key, settings.s3_secret_key.get_secret_value(),
        bootstrap, settings.arrivals, on_started=lambda pid: _record_pid(state_dir, "minio", pid),
    )
    minio.prepare_bucket(storage_client(conn), settings.recordings_bucket)
    minio.prepare_copies_bucket(storage_client(conn), settings.redact_bucket)
    timings["minio_s"] = time.monotonic() - t2
    timings["total_s"] = time.monotonic() - t0

    state = StackState(str(state_dir), kafka_pid, kafka_port, controller_port, minio_pid, minio_port,
                       console_port, time.time(), {k: round(v, 2) for k, v in timings.items()},
                       sasl_port, scram_user.mechanism if scram_user else None)
    (state_dir / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    write_env_file(state_dir / STACK_ENV_FILE, {
        "kafka_bootstrap": bootstrap,
        "s3_endpoint": f"127.0.0.1:{minio_port}",
        "s3_access_key": settings.s3_access_key,
        "s3_secret_key": settings.s3_secret_key.get_secret_value(),
        "recordings_bucket": settings.recordings_bucket,
    })
    return state


def down(settings: Settings) -> list[str]:
    """Stop the processes this state directory started; leave anything else alone."""
    state_dir = settings.state_dir.resolve()
    state = _load_state(state_dir)
    pids_path = state_dir / PIDS_FILE
    pids = json.loads(pids_path.read_text()) if pids_path.exists() else {}  # a failed up leaves only these
    if state is not None:
        pids.update(minio=state.minio_pid, kafka=state.kafka_pid)
    stopped = []
    # MinIO first, so it does not queue events for a broker that is going away.
    for name in ("minio", "kafka"):
        if name in pids and stop(int(pids[name]), str(state_dir)):
            stopped.append(name)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    pids_path.unlink(missing_ok=True)
    (state_dir / STACK_ENV_FILE).unlink(missing_ok=True)
    return stopped


def restart_kafka(settings: Settings) -> StackState:
    """Stop the broker and start it again on the same ports and data (a broker restart drill)."""
    from pipeline.adapters.kafka_admin import wait_for_broker

    state_dir = settings.state_dir.resolve()
    state = _load_state(state_dir)
    if state is None:
        raise StackError(f"no stack in {state_dir}")
    stop(state.kafka_pid, state.marker)
    libs = kafka.ensure_jars(settings.cache_dir)
    pid = kafka.start(libs, state_dir / "kafka", state.kafka_port, state.controller_port,
                      sasl_port=state.sasl_port, sasl_mechanism=state.sasl_mechanism or "SCRAM-SHA-256")
    wait_for_broker(settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{state.kafka_port}"}))
    state = replace(state, kafka_pid=pid)
    (state_dir / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    return state


def stop_minio(settings: Settings) -> None:
    """Stop the MinIO server (a storage outage drill); :func:`start_minio` brings it back."""
    state = _load_state(settings.state_dir.resolve())
    if state is None:
        raise StackError(f"no stack in {settings.state_dir.resolve()}")
    stop(state.minio_pid, state.marker)


def start_minio(settings: Settings) -> StackState:
    """Start MinIO again on the same ports and data directory (after :func:`stop_minio`)."""
    from pipeline.stack import minio

    state_dir = settings.state_dir.resolve()
    state = _load_state(state_dir)
    if state is None:
        raise StackError(f"no stack in {state_dir}")
    pid = minio.start(
        minio.ensure_binary(settings.cache_dir), state_dir / "minio", state.minio_port, state.console_port,
        settings.s3_access_key, settings.s3_secret_key.get_secret_value(),
        f"127.0.0.1:{state.kafka_port}", settings.arrivals, on_started=lambda pid: _record_pid(state_dir, "minio", pid),
    )
    state = replace(state, minio_pid=pid)
    (state_dir / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    return state


def status(settings: Settings) -> dict[str, Any]:
    state = _load_state(settings.state_dir.resolve())
    if state is None:
        return {"running": False, "state_dir": str(settings.state_dir.resolve())}
    kafka_up = alive(state.kafka_pid) and port_open(state.kafka_port)
    minio_up = alive(state.minio_pid) and port_open(state.minio_port)
    return {
        "running": kafka_up and minio_up,
        "state_dir": state.state_dir,
        "kafka": {"pid": state.kafka_pid, "bootstrap": f"127.0.0.1:{state.kafka_port}", "up": kafka_up,
                  **({"sasl_bootstrap": f"127.0.0.1:{state.sasl_port}", "sasl_mechanism": state.sasl_mechanism}
                     if state.sasl_port else {})},
        "minio": {"pid": state.minio_pid, "endpoint": f"127.0.0.1:{state.minio_port}", "up": minio_up},
        "recordings_bucket": settings.recordings_bucket,
        "started_at": state.started_at,
        "start_timings_s": state.timings_s,
        "env_file": str(Path(state.state_dir) / STACK_ENV_FILE),
    }
