"""The header sanity checks hold for every container soundfile opens, not only WAV and FLAC (issue 26 item 9).

An AIFF with 64 channels or at 1 MHz, or an OGG/Vorbis with 64 channels, was routed (its WAV twin was
``corrupt_header``), and the worker then sized its decode buffer by it. Now the router refuses them,
and the worker refuses a routed call that claims them (one routed before the check, or forged).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.file_store import FileStore
from pipeline.events import AudioArrived, ObjectRef, RoutedCall, encode
from pipeline.stages.asr import AsrInput
from pipeline.stages.audio_limits import MAX_CHANNELS, MAX_RATE_HZ, MIN_RATE_HZ
from pipeline.stages.outcomes import Dead as Failed
from pipeline.stages.probe import HEAD_BYTES, NeedsFullRead, ProbeError, probe_full, probe_head
from pipeline.stages.router import ArrivalRouter, Dead, Routed
from pipeline.stages.routing import Buckets
from tests import hostile_audio

# (container, subtype, channels, rate): what libsndfile writes and reads back as such.
HOSTILE = [
    ("AIFF", "PCM_16", 64, 8000),
    ("AIFF", "PCM_16", 2, 1_000_000),
    ("AIFF", "PCM_16", 1, 1000),
    ("OGG", "VORBIS", 64, 8000),
    ("OGG", "OPUS", 64, 48000),
    ("CAF", "PCM_16", 64, 8000),
    ("CAF", "PCM_16", 2, 1_000_000),
    ("AU", "PCM_16", 64, 8000),
    ("AU", "PCM_16", 2, 1_000_000),
    ("W64", "PCM_16", 64, 8000),
    ("NIST", "PCM_16", 64, 8000),
    ("IRCAM", "PCM_16", 64, 8000),
    ("MAT5", "PCM_16", 64, 8000),
    ("AVR", "PCM_16", 2, 1_000_000),
    ("HTK", "PCM_16", 1, 1_000_000),
    ("FLAC", "PCM_16", 1, 1000),
]
PLAUSIBLE = [("AIFF", "PCM_16", 2, 8000), ("OGG", "VORBIS", 2, 16000), ("OGG", "OPUS", 1, 16000),
             ("CAF", "ULAW", 1, 8000), ("AU", "ALAW", 1, 8000), ("MP3", "MPEG_LAYER_III", 1, 8000),
             ("AIFF", "PCM_16", MAX_CHANNELS, 8000)]  # fmt: skip


def _ids(case: tuple[str, str, int, int]) -> str:
    return f"{case[0]}-{case[1]}-{case[2]}ch-{case[3]}Hz"


def _file(tmp_path: Path, case: tuple[str, str, int, int]) -> Path:
    fmt, subtype, channels, rate = case
    return hostile_audio.implausible(tmp_path / f"call.{fmt.lower()}", fmt, subtype, channels, rate)


def _route(path: Path) -> Routed | Dead:
    router = ArrivalRouter(store=FileStore(), buckets=Buckets((30.0,), ("short", "long")),
                           partitions_of=lambda b: 1, max_duration_s=3600)  # fmt: skip
    out = router.route(encode(AudioArrived(object=ObjectRef(bucket="file", key=str(path)))), b"k", {})
    assert isinstance(out, (Routed, Dead))
    return out


@pytest.mark.parametrize("case", HOSTILE, ids=_ids)
def test_the_router_dead_letters_an_implausible_header_in_any_container(tmp_path: Path, case) -> None:
    path = _file(tmp_path, case)
    out = _route(path)
    assert isinstance(out, Dead), f"routed: {out}"
    assert out.letter.reason == "corrupt_header"
    assert str(case[2]) in out.letter.message or str(case[3]) in out.letter.message  # says what it claims


@pytest.mark.parametrize("case", HOSTILE, ids=_ids)
def test_the_probe_refuses_before_counting_frames(tmp_path: Path, case) -> None:
    data = _file(tmp_path, case).read_bytes()
    with pytest.raises(ProbeError) as err:
        try:
            probe_head(data[:HEAD_BYTES], len(data))
        except NeedsFullRead:
            probe_full(data)
    assert err.value.reason == "corrupt_header"


@pytest.mark.parametrize("case", PLAUSIBLE, ids=_ids)
def test_plausible_recordings_in_those_containers_still_route(tmp_path: Path, case) -> None:
    out = _route(_file(tmp_path, case))
    assert isinstance(out, Routed), out
    assert (out.call.channels, out.call.sample_rate_hz) == (case[2], case[3])


def _routed_as_its_header_says(path: Path, case: tuple[str, str, int, int]) -> RoutedCall:
    """What a router without the check (or a forged event) put on the bucket topic."""
    fmt, subtype, channels, rate = case
    ref = FileStore.ref_for(path)
    ref = ref.model_copy(update={"size_bytes": path.stat().st_size})
    return RoutedCall(call_id=path.stem, object=ref, bucket="short", duration_s=2000 / rate, sample_rate_hz=rate,
                      channels=channels, frames=2000, container=fmt, codec=subtype,
                      roles={str(c): f"speaker{c}" for c in range(channels)})  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE, ids=_ids)
def test_the_worker_refuses_a_routed_call_with_an_implausible_header(tmp_path: Path, case) -> None:
    path = _file(tmp_path, case)
    call = _routed_as_its_header_says(path, case)
    fetcher = Fetcher(FileStore(), threads=1)
    try:
        (out,) = fetcher.fetch([AsrInput.of(call.call_id, encode(call), None)])
    finally:
        fetcher.close()
    assert isinstance(out, Failed), f"decoded: {out}"
    assert out.letter.reason == "corrupt_header"


def test_the_limits_are_the_ones_the_wav_probe_applies() -> None:
    assert (MAX_CHANNELS, MIN_RATE_HZ, MAX_RATE_HZ) == (32, 2000, 384_000)
    assert all(not (1 <= ch <= MAX_CHANNELS and MIN_RATE_HZ <= rate <= MAX_RATE_HZ) for _, _, ch, rate in HOSTILE)
