"""`stack up` leaves no orphans (issue 10 item 12): pids recorded at start, ownership matched exactly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import stack
from pipeline.config import Settings
from pipeline.stack.processes import alive, is_ours


@pytest.fixture
def server(tmp_path: Path):
    """A stand-in server process whose command line names a file in the state directory, as Kafka's does."""
    state = tmp_path / "state"
    (state / "kafka").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             f"-Dlog4j2.configurationFile={state}/kafka/log4j2.properties", str(state / "kafka")],
                            start_new_session=True)
    deadline = time.monotonic() + 10  # until the child has exec'd (before, /proc shows the parent's command line)
    while b"time.sleep" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield state, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_ownership_is_the_state_directory_exactly(server) -> None:
    state, proc = server
    assert is_ours(proc.pid, str(state))
    assert is_ours(proc.pid, str(state) + "/")
    assert not is_ours(proc.pid, str(state)[:-1])  # /tmp/.../stat is a substring, not our directory
    assert not is_ours(proc.pid, str(state / "kafka" / "other"))
    assert not is_ours(0, str(state)) and not is_ours(-1, str(state))


def test_down_stops_a_server_recorded_by_a_failed_up(server) -> None:
    state, proc = server
    stack._record_pid(state, "kafka", proc.pid)  # what up records the moment the broker starts
    assert not (state / stack.STATE_FILE).exists()  # up failed before writing its state
    assert stack.down(Settings(state_dir=state)) == ["kafka"]
    proc.wait(10)
    assert not alive(proc.pid)
    assert not (state / stack.PIDS_FILE).exists()
