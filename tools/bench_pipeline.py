"""Pipeline overhead benchmark: end-to-end throughput through Kafka ÷ engine-alone throughput.

One corpus of synthetic stereo 8 kHz calls (espeak-ng), measured twice in one run:

1. engine alone: decode every file and transcribe in batches with the worker's budget,
   in a fresh process (no storage, no Kafka);
2. the distributed pipeline on a fresh local stack: one router and one ASR worker
   (all calls fall in one bucket, so one worker has the machine, like the engine alone);
   the clock runs from the first upload to the last transcript committed.

Prints audio seconds per wall second for both, the ratio, the worker's engine-busy
fraction (engine wall time ÷ pipeline wall time) and the batch fill.

    .venv/bin/python -m tools.bench_pipeline --calls 24
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import soundfile as sf

from pipeline import stack
from pipeline.asr import load_call_audio
from pipeline.config import Settings, read_env_file
from pipeline.events import Transcript, decode
from pipeline.run.shipped_engine import load_engine
from tests.kafka_helpers import TopicReader
from tests.processes import settings_env
from tools.make_sample_calls import make_call

ROOT = Path(__file__).resolve().parent.parent
AGENT = ["Thank you for calling, my name is Anna.", "This call is recorded for quality purposes.",
         "Your payment has been received.", "Is there anything else I can help you with?",
         "I am blocking your card now.", "A new card is on its way."]
CUSTOMER = ["I would like to check my balance.", "I lost my card yesterday.", "Thank you very much.",
            "I want to change my address.", "Can you raise my limit?"]
MAX_CALLS, MAX_AUDIO_S = 16, 1800.0


def make_corpus(folder: Path, n: int, seed: int = 3) -> float:
    rng = random.Random(seed)
    total = 0.0
    for i in range(n):
        turns = []
        for t in range(rng.randint(2, 5)):
            turns.append(("agent", rng.choice(AGENT)) if t % 2 == 0 else ("customer", rng.choice(CUSTOMER)))
        stereo, _ = make_call(turns)
        sf.write(folder / f"bench-{i:03d}.wav", stereo, 8000, subtype="ULAW")
        total += len(stereo) / 8000
    return total


def engine_alone(files: list[Path]) -> tuple[float, float]:
    # The engine exactly as `callqa worker --device cpu` builds it (pipeline.asr.presets.shipped with
    # the rule packs): same batch budget, number pass and prompt.
    engine = load_engine(Settings(), "cpu")
    engine.transcribe_batch([load_call_audio(files[0], {0: "agent", 1: "customer"})])  # warm-up, untimed
    started = time.perf_counter()
    audio_s = 0.0
    for i in range(0, len(files), MAX_CALLS):
        calls = [load_call_audio(f, {0: "agent", 1: "customer"}) for f in files[i:i + MAX_CALLS]]
        engine.transcribe_batch(calls)
        audio_s += sum(c.samples.shape[1] / c.sample_rate for c in calls)
    return audio_s, time.perf_counter() - started


def engine_alone_process(folder: Path) -> tuple[float, float]:
    """The baseline in a fresh process, like a worker (in the benchmark's own process, which had
    imported Kafka, MinIO and test helpers, the same engine ran ~40% slower)."""
    out = subprocess.run([sys.executable, "-m", "tools.bench_pipeline", "--engine-only", str(folder)], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    return figures["audio_s"], figures["wall_s"]


def pipeline(settings: Settings, folder: Path, n: int) -> dict[str, float]:
    env = {**settings_env(settings), "CALLQA_LOG_LEVEL": "info"}
    cli = [sys.executable, "-m", "pipeline.cli"]
    logs = settings.state_dir / "logs"
    logs.mkdir(exist_ok=True)
    procs = [subprocess.Popen([*cli, "router"], env=env, cwd=ROOT, stdout=open(logs / "router.log", "wb"),
                              stderr=subprocess.STDOUT),
             subprocess.Popen([*cli, "worker", "--bucket", "short", "--device", "cpu", "--max-calls", str(MAX_CALLS)],
                              env=env, cwd=ROOT, stdout=open(logs / "worker.log", "wb"), stderr=subprocess.STDOUT)]
    try:
        deadline = time.monotonic() + 300  # wait until the worker has loaded the model and joined
        while b"partitions_assigned" not in (logs / "worker.log").read_bytes():
            if time.monotonic() > deadline:
                raise RuntimeError("worker did not start")
            time.sleep(0.5)
        reader = TopicReader(settings, ["asr.transcripts"])
        started = time.time()
        subprocess.run([*cli, "ingest", str(folder)], env=env, cwd=ROOT, check=True, capture_output=True)
        reader.wait_for(lambda msgs: len(msgs), n, timeout_s=3600, settle_s=2)
        last = max(m.timestamp()[1] for m in reader.messages) / 1000
        transcripts = [decode(m.value(), Transcript) for m in reader.messages]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(60)
    batches = [json.loads(line) for line in (logs / "worker.log").read_text().splitlines()
               if '"batch_transcribed"' in line]
    wall_s = last - started
    return {
        "audio_s": sum(t.duration_s for t in transcripts), "wall_s": wall_s, "transcripts": len(transcripts),
        "busy_s": sum(b["wall_s"] for b in batches), "batches": len(batches),
        "mean_fill_calls": sum(b["calls"] for b in batches) / max(1, len(batches)),
        "mean_fill_audio_s": sum(b["audio_s"] for b in batches) / max(1, len(batches)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("--engine-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_only:
        audio_s, wall_s = engine_alone(sorted(args.engine_only.iterdir()))
        print(json.dumps({"audio_s": audio_s, "wall_s": wall_s}))
        return
    work = Path(tempfile.mkdtemp(prefix="callqa-bench-"))
    corpus = work / "corpus"
    corpus.mkdir()
    total = make_corpus(corpus, args.calls)
    print(f"corpus: {args.calls} synthetic stereo 8 kHz calls, {total:.0f} s audio; machine: {os.cpu_count()} cores, CPU")
    audio_s, engine_s = engine_alone_process(corpus)
    print(f"engine alone:  {audio_s / engine_s:6.2f} audio-s/s  ({audio_s:.0f} s audio in {engine_s:.1f} s)")
    stack.up(Settings(state_dir=work / "stack"))
    try:
        settings = Settings(state_dir=work / "stack", **read_env_file(work / "stack" / "stack.env"))
        r = pipeline(settings, corpus, args.calls)
    finally:
        stack.down(Settings(state_dir=work / "stack"))
    rate = r["audio_s"] / r["wall_s"]
    print(f"pipeline:      {rate:6.2f} audio-s/s  ({r['transcripts']} transcripts, first upload → last transcript "
          f"{r['wall_s']:.1f} s; router + 1 worker + Kafka + MinIO on the same cores)")
    print(f"ratio pipeline / engine alone: {rate / (audio_s / engine_s):.2f} "
          f"(overhead {1 - rate / (audio_s / engine_s):.1%})")
    print(f"engine busy fraction in the pipeline: {r['busy_s'] / r['wall_s']:.1%}; batches {r['batches']}, "
          f"mean fill {r['mean_fill_calls']:.1f} calls / {r['mean_fill_audio_s']:.0f} audio-s "
          f"(budget {MAX_CALLS} calls / {MAX_AUDIO_S:.0f} s)")


if __name__ == "__main__":
    main()
