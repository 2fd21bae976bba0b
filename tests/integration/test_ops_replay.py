"""`callqa replay` on the real stack: reset a stopped group (dry run, then --execute), replay a bucket
into a new group with a real worker, and re-route arrivals past the de-dup markers."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.events import RoutedCall, Transcript, decode
from pipeline.runtime.lag_kafka import OffsetsReader
from tests import audio
from tests.kafka_helpers import TopicReader, consume
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration


def ingest(settings: Settings, folder: Path, names: list[str]) -> None:
    for name in names:
        audio.write(folder / f"{name}.wav", 3.0, 16000)
    result = callqa(settings, "ingest", str(folder))
    assert result.returncode == 0, result.stderr


def routed(settings: Settings, want: int, settle_s: float = 0.0) -> list:
    mine = lambda m: decode(m.value(), RoutedCall).object.bucket == settings.recordings_bucket  # noqa: E731
    return consume(settings, "audio.bucket.short", want=want, timeout_s=120, keep=mine, settle_s=settle_s)


def committed(settings: Settings, group: str) -> dict:
    reader = OffsetsReader(settings)
    try:
        topic = settings.topic("audio.bucket.short")
        return reader.committed(group, [(topic, p) for p in reader.partitions(topic)])
    finally:
        reader.close()


def test_reset_moves_offsets_only_with_execute_and_a_new_group_replays_each_call_once(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    t0 = datetime.now(UTC)
    router = spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}")
    procs = [router]
    reader = TopicReader(settings, ["asr.transcripts"])
    try:
        ingest(settings, tmp_path / "wave1", ["a1", "a2"])
        assert len(routed(settings, 2)) == 2
        time.sleep(1.5)
        t1 = datetime.now(UTC)
        time.sleep(1.5)
        ingest(settings, tmp_path / "wave2", ["b1", "b2"])
        calls = routed(settings, 4)
        assert len(calls) == 4
        worker = spawn(settings, tmp_path / "worker.log", "worker", "--bucket", "short", "--device", "cpu",
                       "--instance-id", f"w-{unique}", asr_threads="1")
        procs.append(worker)
        reader.wait_for(lambda ms: len(ms), 4, timeout_s=300, settle_s=3)
        stop(worker)
        group = settings.topic("asr-short")
        before = committed(settings, group)
        assert sum(o is not None for o in before.values()) >= 2

        dry = callqa(settings, "replay", "reset", "--group", group, "--bucket", "short", "--from", t1.isoformat())
        assert dry.returncode == 0, dry.stderr
        assert "dry run" in dry.stdout and committed(settings, group) == before

        # Expected: per partition, the first wave-2 record; partitions without one move to their end.
        ends = {tp: hi for tp, (_, hi) in OffsetsReader(settings).watermarks(list(before)).items()}
        expected = dict(ends)
        for m in sorted(calls, key=lambda m: -m.offset()):
            if m.timestamp()[1] >= t1.timestamp() * 1000:
                expected[(m.topic(), m.partition())] = m.offset()
        deadline = time.monotonic() + 60
        while True:  # the stopped worker is a static member until its session times out: refused till then
            done = callqa(settings, "replay", "reset", "--group", group, "--bucket", "short",
                          "--from", t1.isoformat(), "--execute")
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            assert "stop its consumers" in done.stderr and committed(settings, group) == before
            time.sleep(3)
        assert done.returncode == 0, done.stdout + done.stderr
        assert committed(settings, group) == expected

        replay_group, replay_id = f"replay-{unique}", f"r-{unique}"
        made = callqa(settings, "replay", "group", "--group", replay_group, "--bucket", "short", "--from", t0.isoformat(),
                      "--execute")
        assert made.returncode == 0, made.stdout + made.stderr
        assert f"--group {replay_group}" in made.stdout
        procs.append(spawn(settings, tmp_path / "replay.log", "worker", "--bucket", "short", "--device", "cpu",
                           "--instance-id", f"w-{unique}", "--group", replay_group, "--replay-id", replay_id,
                           asr_threads="1"))
        tagged = lambda ms: [t for t in (decode(m.value(), Transcript) for m in ms) if t.replay_id == replay_id]  # noqa: E731
        reader.wait_for(lambda ms: len(tagged(ms)), 4, timeout_s=300, settle_s=8)
        replayed = tagged(reader.messages)
        assert Counter(t.call_id for t in replayed) == Counter({"a1": 1, "a2": 1, "b1": 1, "b2": 1})
        assert all(t.model.version for t in replayed)
        originals = [t for t in (decode(m.value(), Transcript) for m in reader.messages) if t.replay_id is None]
        assert sorted(t.call_id for t in originals) == ["a1", "a2", "b1", "b2"]
        assert committed(settings, group) == expected  # the original group's offsets are untouched
        # A running group's offsets are not moved.
        busy = callqa(settings, "replay", "reset", "--group", replay_group, "--bucket", "short", "--offset", "0",
                      "--execute")
        assert busy.returncode == 1 and "stop its consumers" in busy.stderr, busy.stdout + busy.stderr
    finally:
        reader.close()
        for proc in procs:
            stop(proc)


def test_reroute_passes_the_dedup_markers_once_per_generation(settings: Settings, unique: str, tmp_path: Path) -> None:
    t0 = datetime.now(UTC)
    router = spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}")
    try:
        ingest(settings, tmp_path / "calls", ["c1", "c2"])
        assert len(routed(settings, 2)) == 2
        dry = callqa(settings, "replay", "reroute", "--generation", "1", "--from", t0.isoformat())
        assert dry.returncode == 0 and "dry run" in dry.stdout, dry.stdout + dry.stderr
        assert len(routed(settings, 2, settle_s=3)) == 2
        for _ in range(2):  # the second re-route of generation 1 is a duplicate: skipped
            done = callqa(settings, "replay", "reroute", "--generation", "1", "--from", t0.isoformat(), "--execute")
            assert done.returncode == 0, done.stdout + done.stderr
        calls = [decode(m.value(), RoutedCall) for m in routed(settings, 4, settle_s=8)]
        assert Counter((c.call_id, c.replay_id) for c in calls) == Counter(
            {("c1", None): 1, ("c2", None): 1, ("c1", "gen1"): 1, ("c2", "gen1"): 1})
    finally:
        stop(router)
