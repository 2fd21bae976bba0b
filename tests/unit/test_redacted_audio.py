"""``callqa run --redact-audio`` (issue 31 item 2, embedded): a copy of each call with PII under
``OUT/redacted/``, the PII words' audio (plus the guard) silenced on the speaker's channel only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from pipeline.adapters.file_store import FileStore
from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import CallTranscript
from pipeline.asr.transcript import Segment as AsrSegment
from pipeline.batching import BatchBudget
from pipeline.events import Transcript, decode
from pipeline.qa import QAEngine
from pipeline.run.embedded import EmbeddedRunner, RunOptions
from pipeline.run.embedded_files import TRANSCRIPTS
from pipeline.run.embedded_inputs import local_call_ids, local_names
from pipeline.stages.audio_redaction import GUARD_S
from pipeline.stages.routing import Buckets
from tests.fakes import FakeEngine

CARD_WORDS = (
    (4.0, 4.2, "my"),
    (4.2, 4.5, "card"),
    (4.5, 4.6, "is"),
    (4.7, 5.2, "4532"),
    (5.3, 5.8, "0151"),
    (5.9, 6.4, "1283"),
    (6.5, 7.0, "0366"),
)


class WordEngine(FakeEngine):
    """The customer (channel 1) of a call named ``card*`` reads a card number, word-timed; every
    other channel and call says words without numbers."""

    @staticmethod
    def _say(call: CallAudio, texts: dict) -> CallTranscript:  # type: ignore[override]
        segments = [AsrSegment(role=call.roles[0], channel=0, start_s=1.0, end_s=3.0, text="how can I help")]
        if "card" in call.call_id and len(call.roles) > 1:
            segments.append(
                AsrSegment(
                    role=call.roles[1],
                    channel=1,
                    start_s=4.0,
                    end_s=7.0,
                    text=" ".join(w for _, _, w in CARD_WORDS),
                    words=CARD_WORDS,
                )
            )
        duration_s = call.samples.shape[1] / call.sample_rate
        return CallTranscript(
            call.call_id, segments, dict.fromkeys(range(len(call.roles)), "en"), "fake", "1", {"asr_s": 0.0}, duration_s
        )


def noise(frames: int, channels: int) -> np.ndarray:
    return np.random.default_rng(3).integers(-12000, 12000, (frames, channels), dtype=np.int16)


def run(inputs: Path, out: Path, pattern: str = "*.wav") -> tuple[EmbeddedRunner, str]:
    paths = [str(inputs)]
    opts = RunOptions(
        out_dir=out,
        buckets=Buckets((30.0, 120.0), ("short", "medium", "long")),
        budget=BatchBudget(8, 240.0),
        metadata={"roles": "left=agent,right=customer"},
        call_ids=local_call_ids(paths),
        names=local_names(paths),
        redact_audio="silence",
    )
    runner = EmbeddedRunner(opts, FileStore(), WordEngine(), QAEngine.from_paths())
    summary = runner.run([FileStore.ref_for(p) for p in sorted(inputs.rglob(pattern))], lambda calls: lambda f: None)
    assert summary.transcribed == 3
    return runner, (out / "summary.txt").read_text()


def test_a_card_read_by_the_customer_is_silenced_in_a_copy_and_nothing_else_changes(tmp_path: Path) -> None:
    (tmp_path / "in" / "site").mkdir(parents=True)
    original = noise(8000 * 10, 2)
    sf.write(tmp_path / "in" / "site" / "card.wav", original, 8000, subtype="PCM_16")
    ulaw = noise(8000 * 10, 2)
    sf.write(tmp_path / "in" / "card_ulaw.wav", ulaw, 8000, subtype="ULAW")
    sf.write(tmp_path / "in" / "clean.wav", noise(16000 * 10, 1), 16000, subtype="PCM_16")
    _, summary = run(tmp_path / "in", tmp_path / "out")

    [t] = [
        t
        for line in (tmp_path / "out" / TRANSCRIPTS).read_bytes().splitlines()
        if (t := decode(line, Transcript)).call_id == "site/card"
    ]
    assert [(p.type, p.role, p.start_s, p.end_s, p.word_timed) for p in t.pii] == [
        # from the end of "is" (the pause before) to a second after its last word (no later speech on the channel)
        ("bank_card", "customer", 4.6, 8.0, True)
    ]
    copy = tmp_path / "out" / "redacted" / "site" / "card.wav"
    info = sf.info(copy)
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("WAV", "PCM_16", 8000, 2)
    redacted, _ = sf.read(copy, dtype="int16")
    assert redacted.shape == original.shape
    lo, hi = int(np.floor((4.6 - GUARD_S) * 8000)), int(np.ceil((8.0 + GUARD_S) * 8000))
    assert not redacted[lo:hi, 1].any()  # the card's words and the guard: silence
    assert np.array_equal(redacted[:lo, 1], original[:lo, 1]) and np.array_equal(redacted[hi:, 1], original[hi:, 1])
    assert np.array_equal(redacted[:, 0], original[:, 0])  # the agent's channel: untouched

    ulaw_copy = tmp_path / "out" / "redacted" / "card_ulaw.wav"
    assert sf.info(ulaw_copy).subtype == "ULAW"
    before, after = sf.read(tmp_path / "in" / "card_ulaw.wav", dtype="int16")[0], sf.read(ulaw_copy, dtype="int16")[0]
    assert np.array_equal(after[:, 0], before[:, 0]) and np.array_equal(after[hi:, 1], before[hi:, 1])
    assert not after[lo:hi, 1].any()

    assert not (tmp_path / "out" / "redacted" / "clean.wav").exists()  # no PII: no copy
    assert "redacted audio: 2 copies written under redacted/" in summary


def test_flac_stays_flac_and_a_lossy_recording_becomes_a_pcm_16_wav_as_the_summary_says(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    flac = noise(8000 * 10, 2)
    sf.write(tmp_path / "in" / "card_flac.flac", flac, 8000, subtype="PCM_16")
    sf.write(
        tmp_path / "in" / "card_ogg.ogg",
        noise(8000 * 10, 2).astype(np.float32) / 32768,
        8000,
        format="OGG",
        subtype="VORBIS",
    )
    sf.write(tmp_path / "in" / "clean.wav", noise(16000 * 10, 1), 16000, subtype="PCM_16")
    _, summary = run(tmp_path / "in", tmp_path / "out", "*.*")

    flac_copy, _ = sf.read(tmp_path / "out" / "redacted" / "card_flac.flac", dtype="int16")
    lo, hi = int(np.floor((4.6 - GUARD_S) * 8000)), int(np.ceil((8.0 + GUARD_S) * 8000))
    assert sf.info(tmp_path / "out" / "redacted" / "card_flac.flac").format == "FLAC"
    assert np.array_equal(flac_copy[:, 0], flac[:, 0]) and not flac_copy[lo:hi, 1].any()
    assert np.array_equal(flac_copy[hi:, 1], flac[hi:, 1])
    ogg_copy = tmp_path / "out" / "redacted" / "card_ogg.ogg.wav"
    info = sf.info(ogg_copy)
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("WAV", "PCM_16", 8000, 2)
    assert not sf.read(ogg_copy, dtype="int16")[0][lo:hi, 1].any()
    assert "redacted audio: 2 copies written under redacted/" in summary
    assert "1 as PCM_16 WAV (their own format is not written losslessly): card_ogg" in summary


def test_copies_written_inside_the_input_folder_are_not_taken_as_calls_on_a_rerun(tmp_path: Path) -> None:
    from pipeline.config import Settings
    from pipeline.run.embedded import run_paths

    (tmp_path / "in").mkdir()
    sf.write(tmp_path / "in" / "card.wav", noise(8000 * 10, 2), 8000, subtype="PCM_16")
    out = tmp_path / "in" / "results"  # --out inside the folder transcribed
    for _ in range(2):
        summary = run_paths(
            Settings(),
            [str(tmp_path / "in")],
            out,
            {"roles": "left=agent,right=customer"},
            WordEngine(),
            8,
            240.0,
            True,
            "silence",
        )
    assert (out / "redacted" / "card.wav").exists()
    assert (summary.calls, summary.skipped_done) == (1, 1)
