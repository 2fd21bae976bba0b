"""Health endpoints and `callqa lag` on the real stack: a real router and ASR worker, real offsets."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.headers import Stamp
from pipeline.ops.lag import exit_code
from tests import audio
from tests.kafka_helpers import consume
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration
DURATIONS = [4.0, 6.5, 8.0, 5.25]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout_s: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""  # not listening yet


def readiness_codes(port: int, timeout_s: float) -> list[int]:
    """Every /readyz answer until the first 200 (0: not listening yet)."""
    codes: list[int] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (not codes or codes[-1] != 200):
        # a long timeout: a worker loading its model on a loaded machine can take seconds to answer its
        # 503, and a timed-out request read as "not listening" (CI: 0s, then 200, no 503 seen)
        codes.append(get(port, "/readyz", timeout_s=30.0)[0])
        time.sleep(0.1)
    return codes


def lag_json(settings: Settings, unique: str) -> dict:
    result = callqa(settings, "lag", "--json", "--sample-s", "0", "--router-group", f"router-{unique}",
                    "--qa-group", f"qa-{unique}", "--window-end", "06:00")
    data = json.loads(result.stdout)
    assert result.returncode == exit_code(s["status"] for s in data["stages"]), result.stderr  # by verdict
    return data


def stage(data: dict, name: str) -> dict:
    return next(s for s in data["stages"] if s["stage"] == name)


def test_health_endpoints_and_lag_through_a_real_run(settings: Settings, unique: str, tmp_path: Path) -> None:
    for i, d in enumerate(DURATIONS):
        audio.write(tmp_path / "calls" / f"lag-{i}.wav", d, 16000)
    assert callqa(settings, "ingest", str(tmp_path / "calls")).returncode == 0
    router_port, worker_port = free_port(), free_port()
    procs = [spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}",
                   metrics_port=str(router_port))]
    try:
        codes = readiness_codes(router_port, 120)
        assert 503 in codes and codes[-1] == 200, codes  # not ready before its partitions are assigned
        assert codes.index(503) < codes.index(200)
        status, body = get(router_port, "/healthz")
        assert status == 200 and json.loads(body)["ok"]
        status, metrics = get(router_port, "/metrics")
        assert status == 200 and 'callqa_build_info{' in metrics and 'stage="router"' in metrics
        assert get(router_port, "/nope")[0] == 404

        routed = consume(settings, "audio.bucket.short", want=len(DURATIONS), timeout_s=120)
        assert len(routed) == len(DURATIONS)
        stamps = sorted(Stamp.from_headers(m.headers()).cum_calls for m in routed)  # the router stamps each
        assert stamps[-1] >= 1
        queued = stage(lag_json(settings, unique), "asr-short")
        # Work queued, nobody consuming: every call and every audio second is behind.
        assert queued["messages"] == len(DURATIONS)
        assert queued["audio_s"] == pytest.approx(sum(DURATIONS), abs=0.01)
        assert queued["status"] == "no rate yet"
        assert queued["members"] == 0  # the broker's count of the group's consumers: none yet

        procs.append(spawn(settings, tmp_path / "worker.log", "worker", "--bucket", "short", "--device", "cpu",
                           "--instance-id", f"w-{unique}", asr_threads="1", metrics_port=str(worker_port)))
        codes = readiness_codes(worker_port, 240)
        # The worker serves /readyz once its model is loaded, and a static member joins its group
        # within moments: its 503 is a race to see (two CI runs saw 0s, then 200). Not ready before
        # assignment is the unit test's (test_ops_backlog); here, ready means partitions are assigned.
        assert codes[-1] == 200, codes
        assert json.loads(get(worker_port, "/readyz")[1])["assigned_partitions"] >= 1
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = lag_json(settings, unique)
            if stage(done, "asr-short")["messages"] == 0:
                break
            time.sleep(2)
        short = stage(done, "asr-short")
        assert (short["messages"], short["audio_s"], short["status"]) == (0, 0.0, "done")
        # The rate is measured between the two runs' samples of the consumed audio.
        assert short["rate"] is not None and short["rate"] > 0
        assert short["members"] == 1  # the worker, as the broker counts it
        parts = [p for p in done["partitions"] if p["stage"] == "asr-short"]
        assert sum(p["consumed_audio_s"] or 0 for p in parts) == pytest.approx(sum(DURATIONS), abs=0.01)
        _, worker_metrics = get(worker_port, "/metrics")
        assert 'callqa_build_info{' in worker_metrics and "whisper-base" in worker_metrics
        assert "callqa_backlog_messages{" in worker_metrics
    finally:
        for proc in procs:
            stop(proc)


def test_routers_interleaving_in_one_partition_read_back_as_the_exact_backlog_and_totals(
        isolated_settings: Settings) -> None:
    """Six lanes (arrivals partitions, one router each) interleave into one bucket partition; one
    lane wrote only early on, further back than any lane's window. The backlog is the truth to the
    call and the audio second; each lane's totals read back as its last stamp."""
    from confluent_kafka import Producer

    from pipeline.adapters.kafka_admin import apply_catalog
    from pipeline.catalog import load_catalog
    from pipeline.headers import PartitionProgress
    from pipeline.runtime.lag_kafka import OffsetsReader, lane_totals, stage_specs
    from tests.kafka_helpers import commit

    cfg = isolated_settings
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    topic = cfg.topic("audio.bucket.short")
    routers = [PartitionProgress() for _ in range(6)]
    lanes = [5] * 3 + [lane for i in range(400) for lane in (i % 5,)]  # lane 5: only the first three calls
    durations = [1.0 + (i * 7) % 23 for i in range(len(lanes))]
    producer = Producer(cfg.kafka_common())
    stamps = []
    for i, (lane, duration) in enumerate(zip(lanes, durations)):
        stamp = routers[lane].stamp(topic, 0, duration, lane)
        stamps.append(stamp)
        producer.produce(topic, b"{}", f"c{i}".encode(), partition=0, headers=stamp.to_headers())
    assert producer.flush(30) == 0
    group = cfg.topic("asr-short")
    reader = OffsetsReader(cfg)
    try:
        specs = [s for s in stage_specs(cfg, "r", "q") if s.stage == "asr-short"]
        for committed in (0, 2, 150, len(lanes) - 1):
            commit(cfg, group, {(topic, 0): committed})
            [row] = [r for r in reader.backlog(specs) if r.partition == 0]
            assert (row.messages, row.exact) == (len(lanes) - committed, True), committed
            assert row.audio_s == pytest.approx(sum(durations[committed:]), abs=0.01), committed
            consumed = {lane: sum(d for la, d in zip(lanes[:committed], durations) if la == lane) for lane in range(6)}
            if committed < len(lanes) - 1:  # lane 5 found (read back to it): every lane's consumption known
                assert row.consumed_audio_s == pytest.approx(sum(durations[:committed]), abs=0.01), committed
                assert row.consumed_by_lane == pytest.approx(consumed, abs=0.01)
            else:  # lane 5 is far behind the committed offset: not read for, its share unknown
                assert row.consumed_audio_s is None
                assert row.consumed_by_lane == pytest.approx({k: v for k, v in consumed.items() if k != 5}, abs=0.01)
    finally:
        reader.close()
    found = {(tp, stamp.lane): stamp for tp, stamp in lane_totals(cfg, [topic], [0, 2, 5])}
    assert found == {((topic, 0), lane): routers[lane].totals[(topic, 0, lane)] for lane in (0, 2, 5)}
