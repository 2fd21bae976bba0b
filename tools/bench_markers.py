"""How long a router takes to load its de-dup markers, and what they cost in memory, with 1,000,000 markers.

Under a fresh topic prefix on a stack: starts a router on the empty marker topic (baseline RSS),
writes N markers to ``router.seen`` as routers do (keyed by the object version's identity, on
the arrival's partition, in transactions of --per-txn markers), then measures

- the marker read alone, in a fresh process: wall seconds and RSS before/after;
- a router process started on them: seconds from spawn to every partition loaded, the load's own
  seconds (its ``markers_loaded`` log), and its RSS (VmRSS, VmHWM);
- a second router joining the group (each loads half) and the first one leaving (the second
  catches up on the partitions it takes over).

Uses the stack of --state-dir when one runs there (`callqa stack up`); otherwise starts its own
in a temporary directory and stops it at the end.

    .venv/bin/python tools/bench_markers.py [--markers 1000000] [--state-dir .callqa]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline import stack  # noqa: E402
from pipeline.adapters.kafka_admin import apply_catalog  # noqa: E402
from pipeline.adapters.publisher import sarama_partition  # noqa: E402
from pipeline.catalog import load_catalog  # noqa: E402
from pipeline.config import STACK_ENV_FILE, Settings, load_settings, read_env_file  # noqa: E402

PARTITIONS = 6  # router.seen = audio.arrivals in the catalog

READ_ONLY = """
import json, resource, sys, time
from pipeline.config import load_settings
from pipeline.run.router_markers import read_markers
from pipeline.stages.markers import MarkerTable

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

cfg = load_settings()
before = rss_mb()
table = MarkerTable()
plans = table.assign(range(int(sys.argv[1])))
t0 = time.perf_counter()
found = read_markers(cfg, cfg.topic("router.seen"), plans)
read_s = time.perf_counter() - t0
for plan in plans:
    table.loaded(plan, *found[plan.partition])
del found
print(json.dumps({"markers": len(table), "read_s": read_s, "total_s": time.perf_counter() - t0,
                  "rss_before_mb": before, "rss_after_mb": rss_mb(),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_markers(cfg: Settings, count: int, per_txn: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            **cfg.kafka_common(),
            "transactional.id": f"bench-markers-{uuid.uuid4().hex[:6]}",
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500000,
        }
    )
    producer.init_transactions(30)
    topic = cfg.topic("router.seen")
    now = time.time()
    started = time.perf_counter()
    producer.begin_transaction()
    for i in range(count):
        key = f"recordings/2026/12/01/{i % 97:02d}/c{i:07d}.wav"  # as arrivals are keyed: bucket/object
        identity = f"{key}#{uuid.UUID(int=i * 2654435761 % (1 << 128)).hex}"  # + a 32-hex etag
        producer.produce(
            topic, str(now - i * 0.5).encode(), identity.encode(), partition=sarama_partition(key.encode(), PARTITIONS)
        )
        if (i + 1) % per_txn == 0:
            producer.commit_transaction(60)
            producer.begin_transaction()
    producer.commit_transaction(60)
    return time.perf_counter() - started


def proc_status(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) / 1024
    return out


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            row = json.loads(line)
            if row.get("event") == event:
                rows.append(row)
    return rows


class Router:
    def __init__(self, env: dict[str, str], app_id: str, log: Path) -> None:
        self.log = log
        self.started = time.perf_counter()
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "router", "--app-id", app_id],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_loaded(self, count: int, timeout_s: float = 600) -> dict[str, Any]:
        """The ``count``-th markers_loaded event of this router, with when it was seen."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"router exited ({self.proc.returncode}); see {self.log}")
            rows = log_events(self.log, "markers_loaded")
            if len(rows) >= count:
                return {
                    **rows[count - 1],
                    "since_spawn_s": time.perf_counter() - self.started,
                    **proc_status(self.proc.pid),
                }
            time.sleep(0.05)
        raise SystemExit(f"no markers_loaded #{count} in {timeout_s:.0f} s; see {self.log}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--markers", type=int, default=1_000_000)
    parser.add_argument("--per-txn", type=int, default=2000)
    parser.add_argument("--state-dir", default=os.environ.get("CALLQA_STATE_DIR", ".callqa"))
    args = parser.parse_args()
    state_dir = Path(args.state_dir).resolve()
    own_stack = None
    if not (state_dir / STACK_ENV_FILE).exists():
        state_dir = Path(tempfile.mkdtemp(prefix="bench-markers-"))
        own_stack = Settings(state_dir=state_dir)
        print(f"no stack in {args.state_dir}: starting one in {state_dir}")
        stack.up(own_stack)
    try:
        run(state_dir, args.markers, args.per_txn)
    finally:
        if own_stack is not None:
            stack.down(own_stack)


def run(state_dir: Path, count: int, per_txn: int) -> None:
    prefix = f"mk{uuid.uuid4().hex[:6]}."
    cfg = load_settings(state_dir=state_dir, topic_prefix=prefix, **read_env_file(state_dir / STACK_ENV_FILE))
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLQA_")}
    env.update(
        {
            "CALLQA_STATE_DIR": str(state_dir),
            "CALLQA_TOPIC_PREFIX": prefix,
            "CALLQA_LOG_FORMAT": "json",
            "PYTHONPATH": str(ROOT),
        }
    )
    logs = Path(tempfile.mkdtemp(prefix="bench-markers-logs-"))

    empty = Router(env, f"bench-empty-{prefix}", logs / "router-empty.log")
    base = empty.wait_loaded(1)
    empty.stop()

    write_s = write_markers(cfg, count, per_txn)
    print(
        f"markers written: {count} in {write_s:.1f} s ({count / write_s:,.0f}/s), "
        f"transactions of {per_txn}, {PARTITIONS} partitions, prefix {prefix}"
    )

    read = json.loads(
        subprocess.run(
            [sys.executable, "-c", READ_ONLY, str(PARTITIONS)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    print(
        f"read alone (fresh process, 6 partitions): {read['markers']} markers in {read['read_s']:.2f} s "
        f"(+ merge {read['total_s'] - read['read_s']:.2f} s); RSS {read['rss_before_mb']:.0f} -> "
        f"{read['rss_after_mb']:.0f} MiB (peak {read['peak_rss_mb']:.0f} MiB)"
    )

    app_id = f"bench-{prefix}"
    first = Router(env, app_id, logs / "router-a.log")
    a1 = first.wait_loaded(1)
    print(
        f"router start, empty marker topic: loaded in {base['seconds']:.2f} s, ready {base['since_spawn_s']:.1f} s "
        f"after spawn, RSS {base['VmRSS']:.0f} MiB"
    )
    print(
        f"router start, {a1['markers']} markers: load {a1['seconds']:.2f} s, all partitions ready "
        f"{a1['since_spawn_s']:.1f} s after spawn; RSS {a1['VmRSS']:.0f} MiB (peak {a1['VmHWM']:.0f} MiB), "
        f"{a1['VmRSS'] - base['VmRSS']:.0f} MiB over the empty start"
    )
    second = Router(env, app_id, logs / "router-b.log")
    b1 = second.wait_loaded(1)
    a2 = first.wait_loaded(2)
    print(
        f"second router joins: it loads partitions {b1['partitions']} ({b1['markers']} markers) in "
        f"{b1['seconds']:.2f} s, RSS {b1['VmRSS']:.0f} MiB; the first keeps {a2['partitions']} "
        f"({a2['markers']} markers, catch-up {a2['seconds']:.2f} s)"
    )
    first.stop()
    b2 = second.wait_loaded(2)
    print(
        f"first router leaves: the second takes partitions {b2['partitions']}, {b2['read']} markers read, "
        f"{b2['markers']} held, in {b2['seconds']:.2f} s; RSS {b2['VmRSS']:.0f} MiB (peak {b2['VmHWM']:.0f} MiB)"
    )
    second.stop()
    print(f"router logs: {logs}")


if __name__ == "__main__":
    main()
