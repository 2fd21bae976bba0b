"""Small helpers for the local stack's own processes: free ports, start detached, stop ours only."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from pipeline.errors import StackError


def go_binary(cache_dir: Path, name: str, package: str, version: str) -> Path:
    """The cached binary of a Go program, built once from the Go module proxy (``go install
    package@version``) into ``cache_dir/bin/<name>-<version>``: MinIO and Prometheus ship no
    binaries that install here."""
    binary = cache_dir / "bin" / f"{name}-{version}"
    if binary.exists():
        return binary
    if shutil.which("go") is None:
        raise StackError(f"Go is needed once to build {name} into the cache")
    gobin = cache_dir / "bin" / f"gobuild-{name}"
    gobin.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["go", "install", f"{package}@{version}"],
        capture_output=True, text=True, env={**os.environ, "GOBIN": str(gobin), "GOFLAGS": "-mod=mod"},
    )
    if result.returncode != 0:
        raise StackError(f"building {name} failed:\n{result.stderr[-3000:]}")
    (gobin / package.rsplit("/", 1)[-1]).rename(binary)
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_detached(argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start a server in its own session (it outlives the CLI); output goes to its log file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )
    return proc.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def is_ours(pid: int, marker: str) -> bool:
    """Only a process whose command line names our state directory (the directory itself or a
    path inside it, also as ``-Dname=path``) is ours to stop; ``/tmp/a`` does not own ``/tmp/ab``."""
    if pid <= 0:
        return False
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    root = marker.rstrip("/")
    for arg in args:
        for path in (arg, arg.partition("=")[2]):
            if path == root or path.startswith(root + "/"):
                return True
    return False


def stop(pid: int, marker: str, timeout_s: float = 20.0) -> bool:
    """SIGTERM the process group, SIGKILL after the timeout. Returns False if it was not ours."""
    if pid <= 0 or not alive(pid) or not is_ours(pid, marker):
        return False
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return True
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not alive(pid):
            return True
        time.sleep(0.1)
    raise StackError(f"process {pid} did not stop")


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_until(check, what: str, timeout_s: float, pid: int | None = None, log: Path | None = None) -> None:
    """Poll ``check()`` until true; fail early with the log's tail if the process died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if pid is not None and not alive(pid):
            raise StackError(f"{what} exited during start-up{_tail(log)}")
        time.sleep(0.2)
    raise StackError(f"{what} not ready after {timeout_s:.0f}s{_tail(log)}")


def _tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    return "; last log lines:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
