"""How long `callqa lag` takes against bucket topics holding 100,000 routed calls.

Writes N stamped RoutedCalls (log-normal durations, spread over every bucket partition and
stamped in the lane of a random arrivals partition, as routers would stamp them) under a fresh topic prefix, commits each ASR group halfway, then times
the backlog read in-process and the whole `callqa lag --json` command. Needs a running stack
(`callqa stack up`); prints the figures and checks the audio seconds behind against the truth.

    .venv/bin/python tools/lag_100k.py [--calls 100000] [--state-dir .callqa]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.adapters.kafka_admin import apply_catalog  # noqa: E402
from pipeline.catalog import load_catalog  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.events import ObjectRef, RoutedCall, encode  # noqa: E402
from pipeline.headers import PartitionProgress  # noqa: E402
from pipeline.runtime.lag_kafka import OffsetsReader, stage_specs  # noqa: E402
from pipeline.stages.routing import Buckets, PartitionBalancer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--state-dir", default=os.environ.get("CALLQA_STATE_DIR", ".callqa"))
    args = parser.parse_args()
    os.environ["CALLQA_STATE_DIR"] = args.state_dir
    prefix = f"lag{uuid.uuid4().hex[:6]}."
    cfg = load_settings(topic_prefix=prefix)
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    buckets, balancer, progress = Buckets(cfg.bucket_edges_s, cfg.bucket_names), PartitionBalancer(), PartitionProgress()
    rng = random.Random(7)
    lanes = next(s.partitions for s in load_catalog(cfg.bucket_names) if s.name == "audio.arrivals")
    producer = Producer({**cfg.kafka_common(), "linger.ms": 50, "batch.num.messages": 10000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 500000})
    per_partition: dict[tuple[str, int], list[float]] = {}
    started = time.perf_counter()
    for i in range(args.calls):
        duration = min(3600.0, max(10.0, rng.lognormvariate(4.6, 1.0)))  # median ~100 s
        bucket = buckets.bucket_for(duration)
        topic = cfg.topic(f"audio.bucket.{bucket}")
        partition = balancer.choose(bucket, 6, duration)
        call = RoutedCall(call_id=f"c{i:06d}", object=ObjectRef(bucket="recordings", key=f"2026/12/01/c{i:06d}.wav",
                                                                version_id="v1", etag=f"e{i}", size_bytes=int(duration * 16000)),
                          bucket=bucket, duration_s=round(duration, 3), sample_rate_hz=8000, channels=2,
                          frames=int(duration * 8000), container="WAV", codec="ULAW",
                          roles={"0": "agent", "1": "customer"}, metadata={"call-id": f"c{i:06d}"})
        # The lane: the arrivals partition a router took the call from (keys hash over all of them).
        stamp = progress.stamp(topic, partition, call.duration_s, lane=rng.randrange(lanes))
        producer.produce(topic, encode(call), call.call_id.encode(), partition=partition, headers=stamp.to_headers())
        per_partition.setdefault((topic, partition), []).append(call.duration_s)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - started
    # Each ASR group has consumed the first half of every partition.
    truth = 0.0
    for bucket in cfg.bucket_names:
        group = cfg.topic(f"asr-{bucket}")
        consumer = Consumer({**cfg.kafka_common(), "group.id": group, "enable.auto.commit": False})
        offsets = []
        for (topic, partition), durations in per_partition.items():
            if topic == cfg.topic(f"audio.bucket.{bucket}"):
                half = len(durations) // 2
                offsets.append(TopicPartition(topic, partition, half))
                truth += sum(durations[half:])
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
    specs = [s for s in stage_specs(cfg, "callqa-router", "callqa-qa") if s.stage.startswith("asr-")]
    reader = OffsetsReader(cfg)
    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        rows = reader.backlog(specs)
        timings.append(time.perf_counter() - t0)
    reader.close()
    measured = sum(r.audio_s or 0.0 for r in rows)
    env = {**os.environ, "CALLQA_TOPIC_PREFIX": prefix}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "lag", "--json", "--sample-s", "0", "--window-end", "06:00"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode not in (0, 1, 2, 3) or not out.stdout:  # 0-3: the verdict (a backlog: 3, no rate yet)
        raise SystemExit(f"callqa lag failed ({out.returncode}): {out.stderr}")
    command_s = time.perf_counter() - t0
    data = json.loads(out.stdout)
    print(f"calls written: {args.calls} in {produce_s:.1f} s over {len(per_partition)} partitions (prefix {prefix})")
    print(f"audio behind: measured {measured:.1f} s, truth {truth:.1f} s, "
          f"messages behind {sum(r.messages for r in rows)}")
    print(f"backlog read (4 bucket groups, 24 partitions): median {sorted(timings)[2] * 1000:.0f} ms, "
          f"min {min(timings) * 1000:.0f} ms, max {max(timings) * 1000:.0f} ms over 5 runs")
    print(f"`callqa lag --json` command: {command_s:.2f} s wall (process start and imports included), "
          f"its own read {data['took_s'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
