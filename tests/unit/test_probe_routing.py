"""Probe, bucket choice, partition balance and the routing stage, without Kafka or MinIO."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import orjson
import pytest
from minio.error import InvalidResponseError, ServerError

from pipeline.adapters.file_store import FileStore
from pipeline.adapters.minio_store import MinioStore
from pipeline.events import AudioArrived, ObjectRef, encode
from pipeline.stages.probe import HEAD_BYTES, NeedsFullRead, ProbeError, probe_full, probe_head, validate
from pipeline.stages.router import ArrivalRouter, Dead, Routed, Skipped
from pipeline.stages.routing import Buckets, PartitionBalancer, RoutingError, call_id_for, parse_roles
from pipeline.stages.storage import StorageError
from tests import audio

BUCKETS = Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong"))


@pytest.mark.parametrize("fmt, subtype, rate, channels", [
    ("WAV", "ULAW", 8000, 2), ("WAV", "ALAW", 8000, 1), ("WAV", "PCM_16", 16000, 1),
    ("WAV", "FLOAT", 16000, 2), ("FLAC", "PCM_16", 16000, 1), ("FLAC", "PCM_24", 8000, 2),
])
def test_header_probe_matches_the_real_frame_count(tmp_path: Path, fmt, subtype, rate, channels) -> None:
    path = audio.write(tmp_path / f"a.{fmt.lower()}", 95.3, rate, channels, fmt, subtype)
    data = path.read_bytes()
    info = probe_head(data[:HEAD_BYTES], len(data))  # a 64 KiB head of a multi-second file
    assert (info.sample_rate_hz, info.channels) == (rate, channels)
    assert abs(info.duration_s - 95.3) <= 1 / rate
    assert info.frames == probe_full(data).frames


def test_ogg_needs_a_full_read(tmp_path: Path) -> None:
    data = audio.write(tmp_path / "a.ogg", 3.0, 16000, 1, "OGG", "VORBIS").read_bytes()
    with pytest.raises(NeedsFullRead):
        probe_head(data[:HEAD_BYTES], len(data))
    assert abs(probe_full(data).duration_s - 3.0) < 0.01


@pytest.mark.parametrize("subtype, channels", [("GSM610", 1), ("IMA_ADPCM", 2), ("MS_ADPCM", 2)])
def test_block_coded_wavs_are_probed_whole_and_decoded_by_the_worker(tmp_path: Path, subtype, channels) -> None:
    """GSM 6.10 and ADPCM WAVs, as call recorders write them: their length is the codec's, so it
    comes from reading the whole object; the worker's bounded decode then gives the samples."""
    from pipeline.adapters.fetch import decode_bounded
    from pipeline.events import RoutedCall

    path = audio.write(tmp_path / "call.wav", 40.0, 8000, channels, "WAV", subtype)
    data = path.read_bytes()
    with pytest.raises(NeedsFullRead):
        probe_head(data[:HEAD_BYTES], len(data))
    info = probe_full(data)
    assert (info.container, info.codec, info.channels) == ("WAV", subtype, channels)
    assert abs(info.duration_s - 40.0) < 0.05
    call = RoutedCall(call_id="c", object=FileStore.ref_for(path), bucket="medium", duration_s=info.duration_s,
                      sample_rate_hz=8000, channels=channels, frames=info.frames, container="WAV", codec=subtype,
                      roles={str(c): f"speaker{c}" for c in range(channels)})
    decoded = decode_bounded(call, data).samples
    tone = audio.tone(40.0, 8000, channels).T  # the codec pads its last block
    assert decoded.shape == (channels, info.frames) and info.frames >= tone.shape[1]
    assert all(np.corrcoef(decoded[c, : tone.shape[1]], tone[c])[0, 1] > 0.9 for c in range(channels))
    with pytest.raises(ProbeError) as cut:  # a data chunk longer than the object: as for PCM
        probe_head(data[:20_000], 20_000)
    assert cut.value.reason == "truncated"


@pytest.mark.parametrize("make, reason", [
    (lambda p: p.write_bytes(b""), "empty_object"),
    (lambda p: p.write_bytes(b"RIFF\x10\x00\x00\x00JUNK not a wave"), "corrupt_header"),
    (lambda p: audio.wav_with_format_tag(p, 0x55), "unsupported_codec"),
    (lambda p: p.write_bytes(audio.write(p, 10.0, 8000).read_bytes()[:20000]), "truncated"),
])
def test_bad_headers_have_reasons(tmp_path: Path, make, reason: str) -> None:
    path = tmp_path / "bad.wav"
    make(path)
    data = path.read_bytes()
    with pytest.raises(ProbeError) as info:
        probe_head(data[:HEAD_BYTES], len(data))
    assert info.value.reason == reason


def test_text_is_not_audio() -> None:
    with pytest.raises(ProbeError) as info:
        probe_full(b"hello, this is a text file, not a recording\n" * 10)
    assert info.value.reason == "not_audio"
    assert str(info.value) == "not a readable audio file: Format not recognised"  # no buffer address


def test_validate_limits(tmp_path: Path) -> None:
    data = audio.write(tmp_path / "z.wav", 0.0, 8000).read_bytes()
    with pytest.raises(ProbeError, match="no audio frames"):
        validate(probe_head(data, len(data)), 3600)
    data = audio.write(tmp_path / "l.wav", 20.0, 8000).read_bytes()
    with pytest.raises(ProbeError) as info:
        validate(probe_head(data, len(data)), 10)
    assert info.value.reason == "too_long"


def test_bucket_edges() -> None:
    assert [BUCKETS.bucket_for(d) for d in (0.5, 29.99, 30, 119.9, 120, 599, 600, 7200)] == [
        "short", "short", "medium", "medium", "long", "long", "xlong", "xlong"]
    with pytest.raises(RoutingError):
        Buckets((30.0,), ("a", "b", "c"))


def test_partitions_carry_equal_audio_seconds_for_a_heavy_tailed_mix() -> None:
    """2,000 calls, log-normal 10 s – 60 min: the busiest partition of every bucket topic
    is within 10% of that topic's mean audio seconds."""
    rng = random.Random(7)
    durations = [min(3600.0, max(10.0, rng.lognormvariate(4.6, 1.2))) for _ in range(2000)]
    balancer, loads = PartitionBalancer(), {}
    for d in durations:
        bucket = BUCKETS.bucket_for(d)
        p = balancer.choose(bucket, 6, d)
        loads.setdefault(bucket, [0.0] * 6)[p] += d
    assert len(loads) == 4
    for bucket, per_partition in loads.items():
        mean = sum(per_partition) / 6
        assert max(per_partition) <= 1.10 * mean, (bucket, per_partition)
    # Equal message counts would not have done it: hash-like round robin leaves a skew.
    xlong = [d for d in durations if d >= 600]
    round_robin = [sum(xlong[i::6]) for i in range(6)]
    assert max(round_robin) > 1.10 * sum(round_robin) / 6


def test_roles_and_call_ids() -> None:
    assert parse_roles("left=agent,right=customer", 2) == {"0": "agent", "1": "customer"}
    assert parse_roles("1=agent;0=customer", 2) == {"0": "customer", "1": "agent"}
    assert parse_roles(None, 2) == {"0": "agent", "1": "customer"}
    assert parse_roles(None, 1) == {"0": "mixed"}
    assert parse_roles("left=agent,right=customer", 1) == {"0": "mixed"}
    assert parse_roles("mono=agent", 1) == {"0": "agent"}
    with pytest.raises(RoutingError):
        parse_roles("2=agent", 2)
    assert call_id_for("2026/11/30/c-17.wav", {}) == "2026/11/30/c-17"  # unique per stored object
    assert call_id_for("x.wav", {"call-id": "abc"}) == "abc"


def _router() -> ArrivalRouter:
    return ArrivalRouter(store=FileStore(), buckets=BUCKETS, partitions_of=lambda b: 4, max_duration_s=3600)


def _arrival(path: Path, **meta: str) -> bytes:
    return encode(AudioArrived(object=ObjectRef(bucket="file", key=str(path)), metadata=meta))


def test_stage_routes_dedups_and_dead_letters(tmp_path: Path) -> None:
    router, seen = _router(), {}
    good = audio.write(tmp_path / "c1.wav", 45.0, 8000, 2, subtype="ULAW")
    out = router.route(_arrival(good, roles="left=customer,right=agent", **{"agent-id": "a7"}), b"k", seen)
    assert isinstance(out, Routed)
    call = out.call
    # the key (here a path) without its extension: unique per stored object
    assert (call.call_id, call.bucket, call.channels, call.sample_rate_hz) == (
        str(good.resolve().with_suffix("")), "medium", 2, 8000)
    assert call.roles == {"0": "customer", "1": "agent"} and call.agent_id == "a7"
    assert abs(call.duration_s - 45.0) < 1 / 8000
    seen[out.dedup_key] = 1.0
    assert router.route(_arrival(good), b"k", seen) == Skipped("duplicate")
    audio.write(good, 46.0, 8000, 2, subtype="ULAW")  # new content → routed again
    assert isinstance(router.route(_arrival(good), b"k", seen), Routed)

    missing = router.route(_arrival(tmp_path / "nope.wav"), b"k", seen)
    assert isinstance(missing, Dead) and missing.letter.reason == "missing_object"
    junk = router.route(b'{"not": "an arrival"', b"k", seen)
    assert isinstance(junk, Dead) and junk.letter.reason == "malformed_event"
    assert junk.letter.original_payload == b'{"not": "an arrival"'
    silent = audio.write(tmp_path / "s.wav", 5.0, 8000, silent=True)
    assert isinstance(router.route(_arrival(silent), b"k", seen), Routed)  # silence is not an error


def test_stage_skips_deletions() -> None:
    deletion = {"EventName": "s3:ObjectRemoved:Delete", "Key": "b/k",
                "Records": [{"eventName": "s3:ObjectRemoved:Delete", "s3": {}}]}
    assert _router().route(orjson.dumps(deletion), b"b/k", {}) == Skipped("not_creation")


@pytest.mark.parametrize("payload", [
    b'{"Records":[1]}',
    b'{"Records":[{"s3":"x"}]}',
    b'{"Records":[{"s3":{"bucket":{"name":"b"},"object":"x"}}]}',
])
def test_stage_dead_letters_malformed_minio_events(payload: bytes) -> None:
    out = _router().route(payload, b"b/k", {})
    assert isinstance(out, Dead) and out.letter.reason == "malformed_event"
    assert out.letter.original_payload == payload


class _FailingStore:
    """A store whose every call raises what a real client can raise besides our own errors."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def stat(self, ref: ObjectRef):  # noqa: ANN201
        raise self.exc

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        raise self.exc


@pytest.mark.parametrize("exc", [
    InvalidResponseError(502, "text/html", "<html>bad gateway</html>"),
    ServerError("server failed", 503),
    RuntimeError("anything at all"),
], ids=lambda e: type(e).__name__)
def test_stage_dead_letters_any_storage_error(exc: Exception) -> None:
    router = ArrivalRouter(store=_FailingStore(exc), buckets=BUCKETS, partitions_of=lambda b: 4, max_duration_s=3600)
    out = router.route(_arrival(Path("/x.wav")), b"k", {})
    assert isinstance(out, Dead) and out.letter.reason == "fetch_failed"


class _FakeMinio:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def stat_object(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        raise self.exc

    def get_object(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        raise self.exc


@pytest.mark.parametrize("exc", [
    InvalidResponseError(502, "text/html", "<html>bad gateway</html>"),
    ServerError("server failed", 503),
], ids=lambda e: type(e).__name__)
def test_minio_client_errors_become_storage_errors(exc: Exception) -> None:
    store = MinioStore(_FakeMinio(exc))  # type: ignore[arg-type]
    ref = ObjectRef(bucket="b", key="k")
    with pytest.raises(StorageError):
        store.stat(ref)
    with pytest.raises(StorageError):
        store.read(ref)


def test_stage_dead_letters_an_unexpected_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_probe(head: bytes, size_bytes: int):  # noqa: ANN202
        raise IndexError("a bug in a probe")

    monkeypatch.setattr("pipeline.stages.router.probe_head", broken_probe)
    out = _router().route(_arrival(audio.write(tmp_path / "c.wav", 2.0, 8000)), b"k", {})
    assert isinstance(out, Dead) and out.letter.reason == "internal_error"


# --- headers that lie (issue 10 item 5) ------------------------------------------------------

from tests import hostile_audio  # noqa: E402


@pytest.mark.parametrize("make", [
    hostile_audio.wav_block_align_65535,
    hostile_audio.wav_65535_channels,
    hostile_audio.flac_claiming_samples,
], ids=["wav-block-align-65535", "wav-65535-channels", "flac-2^36-samples"])
def test_headers_that_cannot_be_true_are_corrupt(make, tmp_path: Path) -> None:
    path = make(tmp_path / "hostile")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    with pytest.raises(ProbeError) as err:
        probe_head(head, size)
    assert err.value.reason == "corrupt_header", str(err.value)


@pytest.mark.parametrize("channels,rate", [(200, 8000), (1, 3), (2, 10_000_000)])
def test_absurd_channel_counts_and_rates_are_corrupt(channels: int, rate: int) -> None:
    head = hostile_audio.wav_header(channels, rate, channels * 2, 16, 8000) + bytes(8000)
    with pytest.raises(ProbeError) as err:
        probe_head(head, len(head))
    assert err.value.reason == "corrupt_header"


def test_ulaw_and_pcm_block_alignments_that_match_are_accepted() -> None:
    for tag, bits, align in [(7, 8, 2), (1, 16, 4), (1, 24, 6), (3, 32, 8)]:
        head = hostile_audio.wav_header(2, 8000, align, bits, 8000, tag=tag) + bytes(8000)
        assert probe_head(head, len(head)).frames == 8000 // align


def test_a_streamed_flac_says_how_to_make_it_readable(tmp_path: Path) -> None:
    data = hostile_audio.streamed_flac(tmp_path / "s.flac", 3.0).read_bytes()
    with pytest.raises(ProbeError, match=r"FLAC without a length in its header .*sox in.flac out.flac") as info:
        probe_full(data)
    assert info.value.reason == "unsupported_codec"  # a valid file this decoder cannot read

