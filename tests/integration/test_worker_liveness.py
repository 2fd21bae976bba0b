"""A hung accelerator fails liveness (issue 27 item 5); a batch commits while the next computes.

A real worker loop on the session's Kafka and MinIO, with an engine whose transcribe blocks as a
wedged device does: the loop keeps polling (the group keeps its partitions), so only the batch
deadline can tell. /healthz must turn 503 once the batch is past its limit, and 200 again when
the engine returns (the call is then transcribed, not lost).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import soundfile as sf
from confluent_kafka import Producer

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.minio_store import storage_client
from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import CallTranscript
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import ObjectRef, RoutedCall, Transcript, decode, encode
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.runtime.health import StageHealth
from pipeline.runtime.http import serve
from tests.fakes import FakeEngine
from tests.kafka_helpers import TopicReader

pytestmark = pytest.mark.integration

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "calls" / "sample-01-clean.wav"
FLOOR_S = 6.0  # the batch's limit here: its 25 s of audio at RTFx 100 predict 0.25 s


@dataclass
class HangingEngine(FakeEngine):
    """Blocks in transcribe until ``release`` is set, as an engine on a wedged accelerator."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def transcribe_batch(self, calls: Sequence[CallAudio], /) -> list[CallTranscript]:
        self.entered.set()
        self.release.wait()
        return super().transcribe_batch(calls)

    def transcribe(self, call: CallAudio, /) -> CallTranscript:
        self.entered.set()
        self.release.wait()
        return super().transcribe(call)


def healthz(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def route_by_hand(settings: Settings, call_id: str) -> None:
    """Store the recording and put its RoutedCall on the short bucket (the router's job, not tested here)."""
    put = storage_client(settings).fput_object(settings.recordings_bucket, f"{call_id}.wav", str(RECORDING))
    info = sf.info(str(RECORDING))
    call = RoutedCall(
        call_id=call_id,
        object=ObjectRef(
            bucket=settings.recordings_bucket, key=f"{call_id}.wav", version_id=put.version_id, etag=put.etag
        ),
        bucket="short",
        duration_s=info.duration,
        sample_rate_hz=info.samplerate,
        channels=info.channels,
        frames=info.frames,
        container=info.format,
        codec=info.subtype,
        roles={"0": "agent", "1": "customer"},
    )
    producer = Producer(settings.kafka_common())
    producer.produce(settings.topic("audio.bucket.short"), key=call_id.encode(), value=encode(call))
    assert producer.flush(30) == 0


def test_a_batch_hung_past_its_deadline_fails_healthz_while_the_loop_still_polls(
    settings: Settings, unique: str
) -> None:
    cfg = settings.model_copy(
        update={"liveness_batch_floor_s": FLOOR_S, "liveness_batch_factor": 1.0, "liveness_batch_initial_rtfx": 100.0}
    )
    health = StageHealth.from_settings("asr-short", cfg)
    server = serve("127.0.0.1", 0, health)
    engine = HangingEngine()
    worker = AsrWorker(cfg, WorkerOptions(bucket="short", instance_id=f"hang-{unique}"), engine, health)
    loop = threading.Thread(target=worker.run, name="worker-loop", daemon=True)
    reader = TopicReader(cfg, ["asr.transcripts"])
    try:
        route_by_hand(cfg, f"hang-{unique}")
        loop.start()
        assert engine.entered.wait(90), "the worker never started computing the batch"
        started = time.monotonic()
        status, body = healthz(server.server_port)
        assert status == 200 and body["batch_limit_s"] == FLOOR_S and not body["batch_overdue"]

        while (status := healthz(server.server_port))[0] == 200 and time.monotonic() - started < 60:
            time.sleep(0.25)
        status, body = healthz(server.server_port)
        waited_s = time.monotonic() - started
        assert status == 503, f"still {status} after {waited_s:.1f} s of a hung batch: {body}"
        assert FLOOR_S <= waited_s < FLOOR_S + 10
        assert body["batch_overdue"] and body["batch_elapsed_s"] > FLOOR_S
        assert body["last_beat_age_s"] < 5  # the loop is alive: only the batch deadline saw the hang
        assert loop.is_alive()

        engine.release.set()  # the device recovers: the batch completes and commits
        msgs = reader.wait_for(len, 1, timeout_s=60, settle_s=0)
        assert [decode(m.value(), Transcript).call_id for m in msgs] == [f"hang-{unique}"]
        status, body = healthz(server.server_port)
        assert status == 200 and body["batch_elapsed_s"] is None
    finally:
        engine.release.set()
        worker.stopping.set()
        loop.join(60)
        reader.close()
        server.shutdown()


@dataclass
class TimedEngine(FakeEngine):
    """Takes ``compute_s`` per batch, as a device does, and records when each batch ran."""

    compute_s: float = 1.0
    spans: list[tuple[float, float]] = field(default_factory=list)

    def transcribe_batch(self, calls: Sequence[CallAudio], /) -> list[CallTranscript]:
        start = time.monotonic()
        time.sleep(self.compute_s)
        out = super().transcribe_batch(calls)
        self.spans.append((start, time.monotonic()))
        return out


class CommitTimedWorker(AsrWorker):
    """The worker, recording when each batch's transaction ran."""

    commits: list[tuple[float, float]]

    def _commit(self, batch, outcomes):  # type: ignore[no-untyped-def]
        start = time.monotonic()
        try:
            return super()._commit(batch, outcomes)
        finally:
            self.commits.append((start, time.monotonic()))


def test_a_batch_commits_while_the_next_one_computes(settings: Settings, unique: str) -> None:
    """The engine never waits for a transaction: batch k+1 starts before batch k's commit ends."""
    settings = settings.model_copy(update={"topic_prefix": f"t{unique}."})  # its own bucket topic and group
    apply_catalog(settings, load_catalog(settings.bucket_names))
    engine = TimedEngine(compute_s=1.0)
    opts = WorkerOptions(bucket="short", instance_id=f"overlap-{unique}", max_calls=1)
    worker = CommitTimedWorker(settings, opts, engine, StageHealth.from_settings("asr-short", settings))
    worker.commits = []
    ids = [f"overlap-{unique}-{i}" for i in range(4)]
    reader = TopicReader(settings, ["asr.transcripts"])
    loop = threading.Thread(target=worker.run, name="worker-loop", daemon=True)
    try:
        for call_id in ids:  # queued before the loop starts: one batch each, back to back
            route_by_hand(settings, call_id)
        loop.start()
        msgs = reader.wait_for(len, len(ids), timeout_s=90)
        assert sorted(decode(m.value(), Transcript).call_id for m in msgs) == ids  # each once
    finally:
        worker.stopping.set()
        loop.join(60)
        reader.close()
    assert len(engine.spans) == len(ids) and len(worker.commits) == len(ids)
    overlapped = sum(1 for (start, _), (_, done) in zip(engine.spans[1:], worker.commits) if start < done)
    assert overlapped >= len(ids) - 2, (engine.spans, worker.commits)
