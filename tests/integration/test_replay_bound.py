"""Bounded replays on real Kafka: `replay group` captures the input's end offsets, and the replay
stops there by itself (exit 0, one summary line), with records that arrived later left alone.

The QA stage runs as real processes (two members of one replay group); the ASR worker's bound is
the same module, run here in-process with the real Kafka clients and a fake engine (no model).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from confluent_kafka import Producer

from pipeline.adapters.file_store import FileStore
from pipeline.config import Settings
from pipeline.events import ModelInfo, ObjectRef, QAResult, RoutedCall, Segment, Transcript, decode, encode
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.stages.replay_bound import StopOffsets
from tests.fakes import FakeEngine
from tests.kafka_helpers import consume
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration


def transcript(call_id: str) -> Transcript:
    return Transcript(
        call_id=call_id,
        object=ObjectRef(bucket="b", key=f"{call_id}.wav"),
        duration_s=10.0,
        channels=1,
        model=ModelInfo(name="m", version="1"),
        segments=[Segment(role="agent", channel=0, start_s=0.0, end_s=4.0, text="This call is recorded.")],
    )


def produce_in_transactions(settings: Settings, topic: str, items: list[tuple[bytes, bytes]]) -> None:
    """One transaction per record, as a stage writes them: each commit marker takes an offset."""
    producer = Producer({**settings.kafka_common(), "transactional.id": f"test-{topic}-{items[0][0]!r}"})
    producer.init_transactions(30)
    for key, value in items:
        producer.begin_transaction()
        producer.produce(settings.topic(topic), value=value, key=key)
        producer.commit_transaction(30)


def replay_command(settings: Settings, *args: str) -> list[str]:
    made = callqa(settings, "replay", "group", *args, "--execute")
    assert made.returncode == 0, made.stdout + made.stderr
    run = made.stdout.rsplit("run: ", 1)[1].split()
    assert "--stop-at" in run, made.stdout  # before: the command had no bound, the replay ran for ever
    return run[1:]  # without "callqa"


def evaluated(log: Path) -> int:
    return log.read_text(errors="replace").count('"call_evaluated"') if log.exists() else 0


def test_a_bounded_qa_replay_stops_by_itself_and_leaves_later_transcripts_alone(
    settings: Settings, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust's commit interval (2.8 s) made long: the second member joins while the first holds an
    # open transaction with every result (before: results published twice after that rebalance).
    monkeypatch.setenv("BROKER_COMMIT_INTERVAL", "20")
    first = [transcript(f"a{i}") for i in range(6)]
    produce_in_transactions(settings, "asr.transcripts", [(t.call_id.encode(), encode(t)) for t in first])
    group = f"qa-bound-{unique}"
    args = replay_command(settings, "--group", group, "--transcripts", "--offset", "0")
    # Arrived after the replay started: before the members start, and while they run.
    produce_in_transactions(
        settings, "asr.transcripts", [(f"b{i}".encode(), encode(transcript(f"b{i}"))) for i in range(4)]
    )
    logs = [tmp_path / f"qa{i}.log" for i in range(2)]
    procs = [spawn(settings, logs[0], *args)]
    try:
        deadline = time.monotonic() + 120
        while evaluated(logs[0]) < len(first) and time.monotonic() < deadline:
            time.sleep(0.2)
        procs.append(spawn(settings, logs[1], *args))
        produce_in_transactions(
            settings, "asr.transcripts", [(f"c{i}".encode(), encode(transcript(f"c{i}"))) for i in range(4)]
        )
        codes = [proc.wait(timeout=300) for proc in procs]  # each ends by itself
    except subprocess.TimeoutExpired:
        pytest.fail("a bounded QA replay did not stop by itself: " + logs[0].read_text()[-3000:])
    finally:
        for proc in procs:
            stop(proc)
    texts = [log.read_text(errors="replace") for log in logs]
    assert codes == [0, 0], texts
    bound = args[args.index("--stop-at") + 1]
    lines = [line for text in texts for line in text.splitlines() if line.startswith("replay done:")]
    assert len(lines) == 2 and all(f"group {group} at its stop offsets {bound};" in line for line in lines), texts
    processed = sum(int(line.split("; ")[1].split()[0]) for line in lines)
    assert processed >= len(first)

    results = [
        decode(m.value(), QAResult) for m in consume(settings, "qa.findings", want=len(first), timeout_s=60, settle_s=3)
    ]
    assert Counter((r.call_id, r.replay_id) for r in results) == Counter({(t.call_id, group): 1 for t in first})


def routed(path: Path, call_id: str) -> bytes:
    return encode(
        RoutedCall(
            call_id=call_id,
            object=FileStore.ref_for(path),
            bucket="short",
            duration_s=1.0,
            sample_rate_hz=8000,
            channels=1,
            frames=8000,
            container="WAV",
            codec="PCM_16",
            roles={"0": "mixed"},
        )
    )


def test_a_bounded_worker_replay_stops_by_itself_at_its_stop_offsets(
    settings: Settings, unique: str, tmp_path: Path
) -> None:
    wav = tmp_path / "tone.wav"
    sf.write(wav, 0.1 * np.sin(np.linspace(0, 1000, 8000, dtype=np.float32)), 8000, subtype="PCM_16")
    produce_in_transactions(
        settings, "audio.bucket.short", [(f"w{i}".encode(), routed(wav, f"w{i}")) for i in range(5)]
    )
    group = f"asr-bound-{unique}"
    args = replay_command(settings, "--group", group, "--bucket", "short", "--offset", "0")
    bound = StopOffsets.parse(args[args.index("--stop-at") + 1])
    produce_in_transactions(
        settings, "audio.bucket.short", [(f"x{i}".encode(), routed(wav, f"x{i}")) for i in range(3)]
    )
    worker = AsrWorker(
        settings,
        WorkerOptions(bucket="short", device="cpu", instance_id=f"w-{unique}", group=group, stop_at=bound),
        FakeEngine(),
        store=FileStore(),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(180)
    if thread.is_alive():
        worker.stopping.set()
        thread.join(60)
        pytest.fail("a bounded worker replay did not stop by itself")
    assert worker.tally.finished
    assert worker.tally.processed == 5
    found = [
        decode(m.value(), Transcript) for m in consume(settings, "asr.transcripts", want=5, timeout_s=60, settle_s=3)
    ]
    assert Counter((t.call_id, t.replay_id) for t in found) == Counter({(f"w{i}", group): 1 for i in range(5)})
