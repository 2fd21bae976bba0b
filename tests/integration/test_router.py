"""The Faust router against the real broker and MinIO: formats, bad input, duplicates, a killed router."""

from __future__ import annotations

import io
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pipeline.adapters.minio_store import storage_client
from pipeline.adapters.publisher import ArrivalPublisher, sarama_partition
from pipeline.config import Settings
from pipeline.events import DeadLetter, ObjectRef, RoutedCall, decode
from pipeline.stack.minio import prepare_bucket
from tests import audio
from tests.kafka_helpers import TopicReader, consume
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration
BUCKET_TOPICS = [f"audio.bucket.{b}" for b in ("short", "medium", "long", "xlong")]


@pytest.fixture
def settings(stack_settings: Settings, unique: str) -> Settings:
    cfg = stack_settings.model_copy(update={"recordings_bucket": f"rec-{unique}", "max_duration_s": 900.0})
    prepare_bucket(storage_client(cfg), cfg.recordings_bucket)
    return cfg


@pytest.fixture
def router(settings: Settings, unique: str, tmp_path: Path):
    procs = []

    def start(name: str = "r"):
        proc = spawn(settings, tmp_path / f"router-{name}.log", "router", "--app-id", f"router-{unique}")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        stop(proc)


@pytest.fixture
def reader(settings: Settings):
    reader = TopicReader(settings, BUCKET_TOPICS)
    yield reader
    reader.close()


def ours(settings: Settings, reader: TopicReader) -> list[RoutedCall]:
    calls = [decode(m.value(), RoutedCall) for m in reader.messages]
    return [c for c in calls if c.object.bucket == settings.recordings_bucket]


def routed(settings: Settings, reader: TopicReader, want: int, timeout_s: float = 90,
           settle_s: float = 5) -> list[RoutedCall]:
    reader.wait_for(lambda _: len(ours(settings, reader)), want, timeout_s, settle_s)
    return ours(settings, reader)


def dead_letters(settings: Settings, want: int, timeout_s: float = 60) -> list[DeadLetter]:
    prefix = f"{settings.recordings_bucket}/".encode()
    msgs = consume(settings, "router.dlq", want=want, timeout_s=timeout_s, settle_s=3,
                   keep=lambda m: (m.key() or b"").startswith(prefix))
    return [decode(m.value(), DeadLetter) for m in msgs]


def test_ingested_recordings_route_to_the_right_buckets(settings: Settings, router, reader, tmp_path: Path) -> None:
    folder = tmp_path / "calls"
    specs = {  # name: (duration_s, rate, channels, format, subtype, bucket)
        "ulaw-stereo": (12.0, 8000, 2, "WAV", "ULAW", "short"),
        "pcm-mono": (45.0, 16000, 1, "WAV", "PCM_16", "medium"),
        "flac": (130.0, 16000, 1, "FLAC", "PCM_16", "long"),
        "nested/long-ulaw": (650.0, 8000, 2, "WAV", "ULAW", "xlong"),
    }
    for name, (d, rate, ch, fmt, sub, _) in specs.items():
        audio.write(folder / f"{name}.{'flac' if fmt == 'FLAC' else 'wav'}", d, rate, ch, fmt, sub)
    result = callqa(settings, "ingest", str(folder), "--roles", "left=agent,right=customer", "--agent-id", "a-9")
    assert result.returncode == 0, result.stderr
    assert "uploaded 4" in result.stdout
    assert "unchanged 4" in callqa(settings, "ingest", str(folder)).stdout  # a rerun uploads nothing
    router()
    calls = {c.call_id: c for c in routed(settings, reader, want=4)}
    assert len(calls) == 4
    for name, (d, rate, ch, _, _, bucket) in specs.items():
        call = calls[name]  # the object key keeps the folder: nested/long-ulaw
        assert (call.bucket, call.sample_rate_hz, call.channels) == (bucket, rate, ch)
        assert abs(call.duration_s - d) <= 1 / rate
        assert call.agent_id == "a-9"
        assert call.roles == ({"0": "agent", "1": "customer"} if ch == 2 else {"0": "mixed"})


def test_bad_input_is_dead_lettered_and_good_input_still_routes(settings: Settings, router, reader, tmp_path: Path) -> None:
    client = storage_client(settings)
    bad = {
        "empty.wav": b"",
        "text.wav": b"this is not audio at all\n" * 50,
        "header.wav": b"RIFF\x20\x00\x00\x00JUNKxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "truncated.wav": audio.write(tmp_path / "t.wav", 10.0, 8000).read_bytes()[:30000],
        "mp3inwav.wav": audio.wav_with_format_tag(tmp_path / "m.wav", 0x55).read_bytes(),
        "zero.wav": audio.write(tmp_path / "z.wav", 0.0, 8000).read_bytes(),
        "toolong.wav": audio.write(tmp_path / "l.wav", 1000.0, 8000).read_bytes(),
    }
    expected = {"empty.wav": "empty_object", "text.wav": "not_audio", "header.wav": "corrupt_header",
                "truncated.wav": "truncated", "mp3inwav.wav": "unsupported_codec", "zero.wav": "zero_duration",
                "toolong.wav": "too_long", "missing.wav": "missing_object"}
    good = audio.write(tmp_path / "good.wav", 3.0, 8000).read_bytes()
    for name, data in [*bad.items(), ("good.wav", good)]:
        client.put_object(settings.recordings_bucket, name, io.BytesIO(data), len(data))
    publisher = ArrivalPublisher(settings)
    publisher.publish(ObjectRef(bucket=settings.recordings_bucket, key="missing.wav"))
    publisher.flush()
    router()
    letters = dead_letters(settings, want=len(expected))
    reasons = {dl.original_key.split("/", 1)[1]: dl.reason for dl in letters}
    assert reasons == expected
    assert len(letters) == len(expected)
    assert all(dl.source is not None and dl.source.topic == "audio.arrivals" for dl in letters)
    assert [c.call_id for c in routed(settings, reader, want=1)] == ["good"]


def test_duplicates_route_once_and_new_versions_route_again(settings: Settings, router, reader, tmp_path: Path) -> None:
    client = storage_client(settings)
    data = audio.write(tmp_path / "d.wav", 4.0, 8000).read_bytes()
    for _ in range(2):  # the same bytes put twice: a new version, the same content
        client.put_object(settings.recordings_bucket, "dup.wav", io.BytesIO(data), len(data))
    publisher = ArrivalPublisher(settings)  # and the upstream re-publishing it
    publisher.publish(ObjectRef(bucket=settings.recordings_bucket, key="dup.wav"))
    publisher.flush()
    router()
    assert len(routed(settings, reader, want=1)) == 1
    changed = audio.write(tmp_path / "d2.wav", 5.0, 8000).read_bytes()
    client.put_object(settings.recordings_bucket, "dup.wav", io.BytesIO(changed), len(changed))
    calls = routed(settings, reader, want=2)
    assert sorted(round(c.duration_s) for c in calls) == [4, 5]


def test_objects_arriving_several_times_in_one_batch_route_once(settings: Settings, router, reader,
                                                                 tmp_path: Path) -> None:
    """Every arrival is in before the router starts, so each of its batches holds several arrivals
    of one object (MinIO's two puts and the upstream's re-publish), probed together: each object
    routes once, and the rest are skipped, not routed again nor dead-lettered."""
    client = storage_client(settings)
    data = audio.write(tmp_path / "b.wav", 2.0, 8000).read_bytes()
    n = 24
    publisher = ArrivalPublisher(settings)
    for i in range(n):
        for _ in range(2):  # the same bytes put twice: two arrivals, one content identity
            client.put_object(settings.recordings_bucket, f"b/{i:03d}.wav", io.BytesIO(data), len(data))
        publisher.publish(ObjectRef(bucket=settings.recordings_bucket, key=f"b/{i:03d}.wav"))
    publisher.flush()
    router()
    counts = Counter(c.call_id for c in routed(settings, reader, want=n, timeout_s=120, settle_s=8))
    assert len(counts) == n and max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:5]
    prefix = f"{settings.recordings_bucket}/".encode()
    assert consume(settings, "router.dlq", want=1, timeout_s=5, settle_s=0,
                   keep=lambda m: (m.key() or b"").startswith(prefix)) == []


def test_killed_router_routes_every_arrival_exactly_once(settings: Settings, router, reader, tmp_path: Path) -> None:
    client = storage_client(settings)
    data = audio.write(tmp_path / "k.wav", 1.0, 8000).read_bytes()
    n = 300

    def upload() -> None:  # a stream of arrivals, about 25 a second
        for i in range(n):
            client.put_object(settings.recordings_bucket, f"k/{i:04d}.wav", io.BytesIO(data), len(data))
            time.sleep(0.04)

    first = router("first")
    uploader = threading.Thread(target=upload)
    uploader.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(ours(settings, reader)) < 40:
        reader.poll(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert 0 < len(ours(settings, reader)) < n, "the router was not killed in the middle of the stream"
    uploader.join()
    router("second")
    calls = routed(settings, reader, want=n, timeout_s=180, settle_s=8)
    counts = Counter(c.call_id for c in calls)
    assert len(counts) == n
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:5]


def test_hostile_arrival_events_are_dead_lettered_once_and_good_ones_still_route(
        settings: Settings, router, reader, tmp_path: Path) -> None:
    client = storage_client(settings)
    data = audio.write(tmp_path / "g.wav", 2.0, 8000).read_bytes()

    def put_good(names: list[str]) -> None:
        for name in names:
            client.put_object(settings.recordings_bucket, name, io.BytesIO(data), len(data))

    hostile = [b'{"Records":[1]}', b'{"Records":[{"s3":"x"}]}',
               b'{"Records":[{"s3":{"bucket":{"name":"b"},"object":"x"}}]}']
    put_good(["good-1.wav", "good-2.wav"])
    publisher = ArrivalPublisher(settings)  # straight onto the topic, each on a good arrival's partition
    for i, event in enumerate(hostile):
        key = f"{settings.recordings_bucket}/good-{i + 1}.wav".encode()
        publisher.producer.produce(publisher.topic, key=key, value=event,
                                   partition=sarama_partition(key, publisher.partitions))
    publisher.flush()
    put_good(["good-3.wav", "good-4.wav"])
    router()
    assert sorted(c.call_id for c in routed(settings, reader, want=4)) == ["good-1", "good-2", "good-3", "good-4"]
    letters = dead_letters(settings, want=len(hostile))
    assert sorted((dl.original_payload, dl.reason) for dl in letters) == sorted(
        (event, "malformed_event") for event in hostile)


def test_headers_that_lie_are_corrupt_header_and_good_files_still_route(
        settings: Settings, router, reader, tmp_path: Path) -> None:
    from tests import hostile_audio

    client = storage_client(settings)
    hostile = {
        "align.wav": hostile_audio.wav_block_align_65535(tmp_path / "align.wav"),  # 64 MiB
        "samples.flac": hostile_audio.flac_claiming_samples(tmp_path / "samples.flac"),
        "channels.wav": hostile_audio.wav_65535_channels(tmp_path / "channels.wav"),
    }
    good = audio.write(tmp_path / "good.wav", 2.0, 8000)
    for name, path in [*hostile.items(), ("good.wav", good)]:
        client.fput_object(settings.recordings_bucket, name, str(path))
    router()
    letters = dead_letters(settings, want=len(hostile))
    assert sorted((dl.original_key.split("/", 1)[1], dl.reason) for dl in letters) == sorted(
        (name, "corrupt_header") for name in hostile)
    assert [c.call_id for c in routed(settings, reader, want=1)] == ["good"]


def test_same_named_files_in_two_folders_route_as_two_calls(settings: Settings, router, reader, tmp_path: Path) -> None:
    for folder, seconds in (("a", 3.0), ("b", 4.0)):
        audio.write(tmp_path / "calls" / folder / "call.wav", seconds, 8000)
    result = callqa(settings, "ingest", str(tmp_path / "calls"))
    assert result.returncode == 0 and "uploaded 2" in result.stdout, result.stdout + result.stderr
    router()
    calls = {c.call_id: c for c in routed(settings, reader, want=2)}
    assert {k: (c.object.key, round(c.duration_s)) for k, c in calls.items()} == {
        "a/call": ("a/call.wav", 3), "b/call": ("b/call.wav", 4)}


def test_one_name_in_two_folders_given_and_one_call_in_two_formats_route_as_separate_calls(
    settings: Settings, router, reader, tmp_path: Path
) -> None:
    for folder, seconds in (("siteA", 3.0), ("siteB", 4.0)):
        audio.write(tmp_path / folder / "0001.wav", seconds, 8000)
    audio.write(tmp_path / "siteB" / "0002.wav", 5.0, 8000)
    audio.write(tmp_path / "siteB" / "0002.flac", 6.0, 8000, fmt="FLAC")
    result = callqa(settings, "ingest", str(tmp_path / "siteA"), str(tmp_path / "siteB"))
    assert result.returncode == 0 and "uploaded 4" in result.stdout, result.stdout + result.stderr
    router()
    calls = {c.call_id: c for c in routed(settings, reader, want=4)}
    assert {k: (c.object.key, round(c.duration_s)) for k, c in calls.items()} == {
        "siteA/0001": ("siteA/0001.wav", 3), "siteB/0001": ("siteB/0001.wav", 4),
        "siteB/0002.wav": ("siteB/0002.wav", 5), "siteB/0002.flac": ("siteB/0002.flac", 6)}
