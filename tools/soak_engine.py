"""Memory soak: the engine transcribes the same batch of calls over and over; memory must stay flat.

After a warm-up (the allocator and caches reach their working size), memory is
sampled after every batch: process RSS on CPU, allocated and reserved bytes of
the device allocator on an accelerator. Drift is the mean of the last tenth of
the samples against the mean of the first tenth, in percent; the target is
under 0.5 %.

  python -m tools.soak_engine --minutes 30                 # CPU
  python -m tools.soak_engine --minutes 30 --device cuda   # accelerator
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.asr import Engine, EngineOptions, load_call_audio
from tools.bench_corpus import make_corpus


def rss_bytes() -> int:
    """This process's resident memory."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def drift_percent(samples: list[int]) -> float:
    tenth = max(1, len(samples) // 10)
    first, last = float(np.mean(samples[:tenth])), float(np.mean(samples[-tenth:]))
    return 100.0 * (last - first) / first if first else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="soak duration after warm-up")
    parser.add_argument("--corpus-minutes", type=float, default=4.0, help="call audio per batch")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engine = Engine.load(EngineOptions(device=args.device, threads=args.threads))
    calls = make_corpus(args.corpus_minutes * 60, seed=11)
    audios = [load_call_audio(c.wav, roles={0: "agent", 1: "customer"}, call_id=f"s{i}") for i, c in enumerate(calls)]
    for _ in range(args.warmup):
        engine.transcribe_batch(audios)
    rss, allocated, reserved = [], [], []
    started, batches = time.monotonic(), 0
    while time.monotonic() - started < args.minutes * 60:
        engine.transcribe_batch(audios)
        engine.device.synchronize()
        mem = engine.device.memory_bytes()
        rss.append(rss_bytes())
        allocated.append(mem["allocated"])
        reserved.append(mem["reserved"])
        batches += 1
        if batches % 10 == 0:
            print(f"{(time.monotonic() - started) / 60:5.1f} min  batches {batches}  rss {rss[-1] / 2**20:.0f} MB  "
                  f"allocated {allocated[-1] / 2**20:.0f} MB  reserved {reserved[-1] / 2**20:.0f} MB", flush=True)
    report = {
        "device": engine.device.description, "dtype": str(engine.model.dtype), "minutes": args.minutes,
        "batches": batches, "calls_per_batch": len(audios),
        "audio_s_per_batch": round(sum(c.duration_s for c in calls), 1),
        "rss_mb_first_last": [round(rss[0] / 2**20), round(rss[-1] / 2**20)] if rss else None,
        "rss_drift_percent": round(drift_percent(rss), 3) if rss else None,
        "allocated_drift_percent": round(drift_percent(allocated), 3) if allocated else None,
        "reserved_drift_percent": round(drift_percent(reserved), 3) if reserved else None,
    }
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
