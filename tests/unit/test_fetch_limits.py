"""The worker's fetch caps what it reads and decodes by the routed header (issue 10 item 5)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.file_store import FileStore
from pipeline.events import RoutedCall, encode
from pipeline.stages.asr import AsrInput
from pipeline.stages.asr import Fetched as Ready
from pipeline.stages.audio_limits import max_decoded_frames, max_object_bytes
from pipeline.stages.outcomes import Dead as Failed
from tests import audio, hostile_audio


class CountingFileStore(FileStore):
    """Local files, recording how many bytes each read asked for."""

    def __init__(self) -> None:
        self.asked: list[int | None] = []

    def read(self, ref, offset=0, length=None):
        self.asked.append(length)
        return super().read(ref, offset, length)


def routed(path: Path, duration_s: float, rate: int = 8000, channels: int = 1, size: bool = True) -> RoutedCall:
    ref = FileStore.ref_for(path)
    ref = ref.model_copy(update={"size_bytes": path.stat().st_size}) if size else ref
    return RoutedCall(call_id=path.stem, object=ref, bucket="short", duration_s=duration_s, sample_rate_hz=rate,
                      channels=channels, frames=int(duration_s * rate), container="WAV", codec="PCM_16",
                      roles={str(c): "mixed" if channels == 1 else f"speaker{c}" for c in range(channels)})


@pytest.fixture
def fetcher():
    f = Fetcher(CountingFileStore(), threads=2)
    yield f
    f.close()


def fetch(fetcher: Fetcher, calls: list[RoutedCall]) -> dict[str, Ready | Failed]:
    return {c.call_id: r for c, r in zip(calls, fetcher.fetch([AsrInput.of(c.call_id, encode(c), None) for c in calls]))}


def test_an_object_larger_than_its_routed_header_allows_is_not_read(fetcher: Fetcher, tmp_path: Path) -> None:
    big = audio.write(tmp_path / "big.wav", 600.0, 8000)  # 9.6 MB, routed as if it were one second long
    good = audio.write(tmp_path / "good.wav", 2.0, 8000)
    out = fetch(fetcher, [routed(big, 1.0), routed(good, 2.0)])
    assert isinstance(out["big"], Failed) and out["big"].letter.reason == "corrupt_header"
    assert isinstance(out["good"], Ready) and out["good"].audio.samples.shape == (1, 16000)
    assert fetcher.store.asked == [max_object_bytes(routed(good, 2.0)) + 1]  # only the good one, capped


def test_a_read_is_capped_when_the_size_is_not_known(fetcher: Fetcher, tmp_path: Path) -> None:
    path = hostile_audio.wav_block_align_65535(tmp_path / "align.wav", size_bytes=8 * 2**20)
    call = routed(path, 1.0, size=False)
    out = fetch(fetcher, [call])["align"]
    assert isinstance(out, Failed) and out.letter.reason == "corrupt_header"
    assert fetcher.store.asked == [max_object_bytes(call) + 1]


def test_a_stream_that_disagrees_with_its_routed_header_is_not_decoded(fetcher: Fetcher, tmp_path: Path) -> None:
    many = hostile_audio.wav_65535_channels(tmp_path / "channels.wav")
    stereo = audio.write(tmp_path / "stereo.wav", 1.0, 8000, channels=2)
    flac = hostile_audio.flac_claiming_samples(tmp_path / "samples.flac")
    good = audio.write(tmp_path / "good.wav", 1.0, 8000)
    out = fetch(fetcher, [routed(many, 5.0), routed(stereo, 1.0, channels=1), routed(flac, 1.0), routed(good, 1.0)])
    assert {k: v.letter.reason for k, v in out.items() if isinstance(v, Failed)} == {
        "channels": "decode_failed", "stereo": "corrupt_header", "samples": "corrupt_header"}
    assert isinstance(out["good"], Ready)


def test_decoded_frames_allow_the_routed_duration_with_a_margin() -> None:
    call = routed(Path(__file__), 10.0)
    assert 80_000 < max_decoded_frames(call) <= 80_000 * 1.05 + 8000


def test_a_streamed_flac_is_decoded_no_further_than_its_routed_duration(fetcher: Fetcher, tmp_path: Path) -> None:
    """No length in the header, so the header check cannot help: the decode itself stops at the cap."""
    hour = hostile_audio.streamed_flac(tmp_path / "hour.flac", 3600.0)  # ~80 KB; 115 MB once decoded
    assert sf.info(hour).frames >= 2**62 and hour.stat().st_size < max_object_bytes(routed(hour, 1.0))
    tracemalloc.start()
    try:
        out = fetch(fetcher, [routed(hour, 1.0)])["hour"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(out, Failed) and out.letter.reason == "corrupt_header"
    assert "decodes to more than" in out.letter.message
    assert peak < 8 * 2**20  # the routed second plus margin, not the hour


def test_bounded_decode_gives_what_a_plain_read_gives(fetcher: Fetcher, tmp_path: Path) -> None:
    path = audio.write(tmp_path / "stereo.wav", 2.0, 8000, channels=2)
    out = fetch(fetcher, [routed(path, 2.0, channels=2)])["stereo"]
    plain, _ = sf.read(path, dtype="float32", always_2d=True)
    assert isinstance(out, Ready) and out.audio.samples.flags.c_contiguous
    assert np.array_equal(out.audio.samples, plain.T) and out.audio.roles == ("speaker0", "speaker1")


@pytest.mark.parametrize(("subtype", "codec"), [("PCM_16", "PCM_16"), ("ULAW", "ULAW"), ("PCM_U8", "PCM_8")])
def test_a_wav_left_with_a_zero_data_size_is_decoded_whole(fetcher: Fetcher, tmp_path: Path, subtype: str,
                                                           codec: str) -> None:
    """A recorder that died before patching its header: the router reads the length from the size."""
    import struct

    from pipeline.stages.probe import HEAD_BYTES, probe_head

    path = audio.write(tmp_path / "crashed.wav", 3.0, 8000, channels=2)
    samples, _ = sf.read(path, dtype="float32", always_2d=True)
    sf.write(path, samples, 8000, subtype=subtype)
    expected, _ = sf.read(path, dtype="float32", always_2d=True)
    data = bytearray(path.read_bytes())
    data_at = data.index(b"data")
    struct.pack_into("<I", data, data_at + 4, 0)
    path.write_bytes(bytes(data))
    assert sf.info(path).frames == 0  # what libsndfile alone makes of it
    assert probe_head(bytes(data[:HEAD_BYTES]), len(data)).frames == 24000
    call = routed(path, 3.0, channels=2).model_copy(update={"codec": codec})
    out = fetch(fetcher, [call])["crashed"]
    assert isinstance(out, Ready) and np.array_equal(out.audio.samples, expected.T)
