"""Channels and levels as decoded: a stereo recording whose two channels carry one signal is one
mixed channel, in both decoders; a quiet call is raised to speech level with one gain."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pipeline.adapters.fetch import decode_bounded
from pipeline.adapters.file_store import FileStore
from pipeline.asr.audio import (
    MAX_GAIN,
    MIXED_ROLE,
    TARGET_PEAK,
    at_speech_level,
    load_call_audio,
    merge_copied_channels,
)
from pipeline.events import RoutedCall

CALL = Path(__file__).resolve().parents[1] / "fixtures" / "calls" / "sample-03-mis-selling.wav"  # agent left, customer right
ROLES = ("agent", "customer")


def two_parties() -> np.ndarray:
    samples, _ = sf.read(CALL, dtype="float32", always_2d=True)
    return np.ascontiguousarray(samples.T)


def ulaw(samples: np.ndarray) -> np.ndarray:
    """Through G.711 u-law and back, as a telephony recorder stores it."""
    buf = io.BytesIO()
    sf.write(buf, samples.T, 8000, format="WAV", subtype="ULAW")
    return np.ascontiguousarray(sf.read(io.BytesIO(buf.getvalue()), dtype="float32", always_2d=True)[0].T)


def test_one_mix_on_both_sides_is_one_mixed_channel() -> None:
    mix = two_parties().mean(axis=0)
    for copied in (np.stack([mix, mix]), ulaw(np.stack([mix, 0.6 * mix]))):  # even at another level, through u-law
        merged, roles = merge_copied_channels(copied, ROLES)
        assert roles == (MIXED_ROLE,) and merged.shape == (1, copied.shape[1]) and merged.dtype == np.float32
        assert np.corrcoef(merged[0], mix)[0, 1] > 0.99


@pytest.mark.parametrize("case", ["two parties", "one side silent", "echo of the agent on a silent line", "mono"])
def test_anything_else_is_left_as_it_was(case: str) -> None:
    agent = two_parties()[0]
    samples = {
        "two parties": two_parties(),
        "one side silent": np.stack([agent, np.zeros_like(agent)]),
        "echo of the agent on a silent line": np.stack([agent, 0.05 * agent]),  # 26 dB down
        "mono": agent[None, :],
    }[case]
    roles = ROLES[: samples.shape[0]]
    out, out_roles = merge_copied_channels(samples, roles)
    assert out is samples and out_roles == roles


def test_both_decoders_merge_a_copied_stereo_file(tmp_path: Path) -> None:
    mix = two_parties().mean(axis=0)
    path = tmp_path / "dup.wav"
    sf.write(path, np.stack([mix, mix], axis=1), 8000, subtype="ULAW")
    call = RoutedCall(call_id="dup", object=FileStore.ref_for(path), bucket="short", duration_s=len(mix) / 8000,
                      sample_rate_hz=8000, channels=2, frames=len(mix), container="WAV", codec="ULAW",
                      roles={"0": "agent", "1": "customer"})
    for audio in (decode_bounded(call, path.read_bytes()), load_call_audio(path, roles={0: "agent", 1: "customer"})):
        assert audio.roles == (MIXED_ROLE,) and audio.samples.shape == (1, len(mix))
    kept = load_call_audio(CALL, roles={0: "agent", 1: "customer"})
    assert kept.roles == ROLES and kept.channels == 2


def test_a_quiet_call_is_raised_with_one_gain_for_both_sides() -> None:
    call = two_parties()  # peaks at -2.4 dBFS: left as it is
    assert at_speech_level(call) is call
    quiet = call * np.float32(0.01)  # 40 dB down
    echo = np.stack([quiet[0], quiet[0] * np.float32(0.03)])  # the agent, and their echo 30 dB down
    for samples in (quiet, echo):
        raised = at_speech_level(samples)
        assert np.isclose(np.abs(raised).max(), TARGET_PEAK)
        assert np.allclose(raised[1] * np.abs(samples).max(), samples[1] * np.abs(raised).max(), atol=1e-6)
    silent = np.zeros_like(call)
    assert at_speech_level(silent) is silent
    hiss = np.full_like(call, 1e-5)  # -100 dBFS: raised 40 dB at most
    assert np.isclose(np.abs(at_speech_level(hiss)).max(), 1e-5 * MAX_GAIN)


def test_a_quiet_party_is_raised_alone_but_an_echo_of_the_other_is_not() -> None:
    call = two_parties()  # they take turns
    quiet = np.stack([call[0], call[1] * np.float32(10 ** (-25 / 20))])  # the customer 25 dB under
    raised = at_speech_level(quiet)
    assert np.array_equal(raised[0], quiet[0]) and np.isclose(np.abs(raised[1]).max(), TARGET_PEAK)
    # a silent customer leg carrying the agent's line echo, delayed, filtered, 26 dB down, over hiss
    rng = np.random.default_rng(0)
    echo = np.roll(np.convolve(call[0], [0.5, 0.3, 0.2], "same"), 40).astype(np.float32) * np.float32(0.05)
    echo += rng.standard_normal(echo.size).astype(np.float32) * np.float32(1e-4)
    leg = np.stack([call[0], echo])
    assert at_speech_level(leg) is leg
