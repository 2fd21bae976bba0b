"""Router benchmark: arrivals routed per second by one Faust router process, with the probe's share.

Starts its own local stack (temporary state directory), stores a burst of N short
recordings in MinIO (whose own notifications become the arrivals), then runs one
`callqa router` process and times the burst from the first routed call to the last
(read committed, so the figure includes the exactly-once commits). The baseline, in
the same run: the routing stage alone (same objects, same MinIO, no Kafka).

    .venv/bin/python -m tools.bench_router --calls 3000
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf

from pipeline import stack
from pipeline.adapters.minio_store import MinioStore, storage_client
from pipeline.config import Settings, read_env_file
from pipeline.events import AudioArrived, ObjectRef, RoutedCall, decode, encode
from pipeline.stack.minio import prepare_bucket
from pipeline.stages.router import ArrivalRouter
from pipeline.stages.routing import Buckets
from tests.kafka_helpers import TopicReader
from tests.processes import settings_env

ROOT = Path(__file__).resolve().parent.parent


def wav(seconds: float, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.zeros((int(seconds * rate), 2), dtype=np.float32), rate, format="WAV", subtype="ULAW")
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="callqa-bench-"))
    stack.up(Settings(state_dir=state))
    try:
        run(Settings(state_dir=state, **read_env_file(state / "stack.env")), args.calls)
    finally:
        stack.down(Settings(state_dir=state))


def run(settings: Settings, n: int) -> None:
    client = storage_client(settings)
    prepare_bucket(client, settings.recordings_bucket)
    payloads = [wav(1 + (i % 50)) for i in range(50)]  # 1-50 s recordings, 8 kHz stereo µ-law
    keys = [f"bench/{i:05d}.wav" for i in range(n)]
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.put_object(settings.recordings_bucket, keys[i],
                                                  io.BytesIO(payloads[i % 50]), len(payloads[i % 50])), range(n)))
    print(f"stored {n} recordings in {time.perf_counter() - started:.1f} s")

    # Baseline: the routing stage alone over the same objects (probe + decisions, no Kafka).
    stage = ArrivalRouter(store=MinioStore(client), buckets=Buckets(settings.bucket_edges_s, settings.bucket_names),
                          partitions_of=lambda b: 6, max_duration_s=settings.max_duration_s)
    sample = keys[: min(n, 1000)]
    t0, c0 = time.perf_counter(), time.process_time()
    for key in sample:
        stage.route(encode(AudioArrived(object=ObjectRef(bucket=settings.recordings_bucket, key=key))), None, {})
    stage_rate = len(sample) / (time.perf_counter() - t0)
    stage_cpu_ms = (time.process_time() - c0) * 1000 / len(sample)

    reader = TopicReader(settings, [f"audio.bucket.{b}" for b in settings.bucket_names])
    log = open(settings.state_dir / "router.log", "wb")
    router = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "router"], cwd=ROOT,
                              env={**settings_env(settings), "CALLQA_LOG_LEVEL": "warning"}, stdout=log,
                              stderr=subprocess.STDOUT)
    cpu_at_first: list[float] = []

    def count(msgs: list) -> int:  # the router's CPU clock is read when its first call shows up
        if msgs and not cpu_at_first:
            cpu_at_first.append(cpu_seconds(router.pid))
        return len(msgs)

    try:
        reader.wait_for(count, n, timeout_s=1800, settle_s=3)
        router_cpu_s = cpu_seconds(router.pid) - (cpu_at_first[0] if cpu_at_first else 0.0)
    finally:
        router.terminate()
        router.wait(60)
    calls = [decode(m.value(), RoutedCall) for m in reader.messages]
    stamps = sorted(m.timestamp()[1] for m in reader.messages)
    wall_s = (stamps[-1] - stamps[0]) / 1000
    probe_s = sum(c.probe_ms for c in calls) / 1000
    rate = (len(calls) - 1) / wall_s if wall_s else float("nan")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} (1 / 5 min); router: 1 process, exactly_once; calls routed: {len(calls)} "
          f"(unique {len({c.call_id for c in calls})})")
    print(f"router:        {rate:8.1f} arrivals/s  (first to last routed call, {wall_s:.1f} s)")
    print(f"probe share:   {probe_s / wall_s:8.1%} of router wall time ({probe_s * 1000 / len(calls):.2f} ms/call; "
          "summed over calls: above 100 % when probes overlap)")
    print(f"router CPU:    {router_cpu_s:8.1f} s  ({router_cpu_s * 1000 / len(calls):.2f} ms/call, "
          f"{router_cpu_s / wall_s:.0%} of one core; from its first routed call to the end, settling included)")
    print(f"stage alone:   {stage_rate:8.1f} arrivals/s  (baseline: probe + routing, no Kafka, same objects; "
          f"{stage_cpu_ms:.2f} ms CPU/call in this process, MinIO's not counted)")
    print(f"ratio router / stage alone: {rate / stage_rate:.2f}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
