"""The distributed redaction stage's pure decisions (pipeline/stages/redacted_copies.py) and the one
copy function both modes share (pipeline/run/redacted_audio.redacted_copy)."""

from __future__ import annotations

import hashlib
import io

import jsonschema
import numpy as np
import orjson
import pytest
import soundfile as sf

from pipeline.adapters.file_store import FileStore
from pipeline.catalog import load_schema
from pipeline.events import (
    AudioRedacted,
    DeadLetter,
    ObjectRef,
    PIISpan,
    RoutedCall,
    Segment,
    SourcePosition,
    Transcript,
    decode,
    encode,
)
from pipeline.run.redacted_audio import info_of, redacted_copy, spans_of, write_redacted
from pipeline.stages.audio_redaction import GUARD_S
from pipeline.stages.probe import ProbeError
from pipeline.stages.redacted_copies import (
    CopyTooLarge,
    NothingToRedact,
    Redact,
    Target,
    UnreadableRecording,
    check_matches,
    copy_key,
    copy_metadata,
    letter_for,
    plan,
    plan_payload,
    probe_recording,
    reason_for,
    redacted_event,
)
from pipeline.stages.retry import StorageUnavailable
from pipeline.stages.storage import MissingObject, ObjectChanged, StorageError, StorageRefused
from tests.samples import pii_transcript

REF = ObjectRef(bucket="recordings", key="2026/12/03/call-7.wav", version_id="v3", etag="abc123", size_bytes=160044)
CARD = PIISpan(type="bank_card", role="customer", start_s=4.7, end_s=7.0, confidence=0.6, word_timed=True)
CVV = PIISpan(type="card_secret", role="customer", start_s=9.1, end_s=9.9, confidence=0.5, word_timed=True)
TARGET = Target("recordings-redacted", "site-a/")
SOURCE = SourcePosition(topic="asr.transcripts", partition=2, offset=17)


def transcript(
    pii: list[PIISpan], channels: int = 2, roles: str | None = "left=agent,right=customer", replay_id: str | None = None
) -> Transcript:
    # the customer's channel has no segment of its own here: the roles come from the metadata
    turn = Segment(role="agent", channel=0, start_s=0.5, end_s=3.0, text="how can I help")
    return pii_transcript(REF, pii, duration_s=10.0, channels=channels, segment=turn, roles=roles, replay_id=replay_id)


def test_the_key_is_the_same_for_the_same_transcript_and_a_redelivery() -> None:
    payload = encode(transcript([CARD, CVV]))
    first, again = plan_payload(payload, b"k", TARGET, SOURCE), plan_payload(payload, b"k", TARGET, SOURCE)
    assert isinstance(first, Redact) and isinstance(again, Redact)
    assert first.key == again.key == "site-a/recordings/2026/12/03/call-7.wav"
    # a later transcript of the same call (another produced_at) still writes the same copy
    later = transcript([CARD, CVV]).model_copy(update={"produced_at": transcript([]).produced_at})
    assert copy_key(TARGET, later) == first.key


def test_a_replayed_transcript_gets_its_own_key_that_no_bucket_name_can_take() -> None:
    replayed = copy_key(TARGET, transcript([CARD], replay_id="gen2/asr-r2"))
    assert replayed == "site-a/_replay/gen2/asr-r2/recordings/2026/12/03/call-7.wav"
    assert replayed != copy_key(TARGET, transcript([CARD]))
    assert copy_key(Target("b"), transcript([CARD])) == "recordings/2026/12/03/call-7.wav"


def test_a_transcript_without_pii_writes_nothing() -> None:
    assert plan(transcript([]), TARGET) == NothingToRedact("2026/12/03/call-7")
    assert isinstance(plan_payload(encode(transcript([])), b"k", TARGET), NothingToRedact)


def test_spans_are_cut_on_the_party_channel_from_the_roles_metadata() -> None:
    p = plan(transcript([CVV, CARD]), TARGET)
    assert isinstance(p, Redact)
    assert [(s.type, chs) for s, chs in p.spans] == [("bank_card", (1,)), ("card_secret", (1,))]  # in call order
    # roles swapped by the upstream: the customer is on the left
    swapped = plan(transcript([CARD], roles="left=customer,right=agent"), TARGET)
    assert isinstance(swapped, Redact) and swapped.spans[0][1] == (0,)
    # a party no channel has (a mono mix on two channels is "mixed"): every channel, fail closed
    mixed = plan(transcript([CARD.model_copy(update={"role": "mixed"})]), TARGET)
    assert isinstance(mixed, Redact) and mixed.spans[0][1] == (0, 1)
    mono = plan(transcript([CARD], channels=1, roles=None), TARGET)
    assert isinstance(mono, Redact) and mono.spans[0][1] == (0,)


def test_the_event_names_the_copy_and_its_spans_and_fits_its_schema() -> None:
    p = plan(transcript([CARD, CVV], replay_id="asr-r2"), TARGET)
    assert isinstance(p, Redact)
    data = b"RIFF....copy bytes"
    event = redacted_event(
        p,
        bucket=TARGET.bucket,
        key=p.key,
        data=data,
        version_id="cv1",
        format="WAV",
        subtype="PCM_16",
        converted=False,
        sample_rate_hz=8000,
        channels=2,
        mode="tone",
    )
    assert (event.call_id, event.bucket, event.key, event.version_id) == (
        "2026/12/03/call-7",
        "recordings-redacted",
        "site-a/_replay/asr-r2/recordings/2026/12/03/call-7.wav",
        "cv1",
    )
    assert event.sha256 == hashlib.sha256(data).hexdigest() and event.size_bytes == len(data)
    assert event.source == REF and (event.mode, event.guard_s) == ("tone", GUARD_S)
    assert [(s.type, s.role, s.start_s, s.end_s, s.word_timed, s.channels) for s in event.spans] == [
        ("bank_card", "customer", 4.7, 7.0, True, [1]),
        ("card_secret", "customer", 9.1, 9.9, True, [1]),
    ]
    assert (event.replay_id, event.replay_lineage) == ("asr-r2", ["asr-r2"])
    payload = encode(event)
    jsonschema.validate(orjson.loads(payload), load_schema("audio_redacted"))
    assert decode(payload, AudioRedacted, strict=True) == event
    assert b"4532" not in payload  # spans carry times and types, never digits


@pytest.mark.parametrize(
    "error, phase, reason",
    [
        (MissingObject("recordings/x.wav: NoSuchKey"), "read", "missing_object"),
        (ObjectChanged("recordings/x.wav: etag"), "read", "object_changed"),
        (StorageUnavailable("storage unavailable for 300 s"), "read", "fetch_failed"),
        (StorageRefused("AccessDenied"), "read", "fetch_failed"),
        (MissingObject("recordings-redacted: NoSuchBucket"), "write", "write_failed"),
        (StorageError("HTTP 503"), "write", "write_failed"),
        (CopyTooLarge("too big"), "read", "output_too_large"),
        (UnreadableRecording("cannot be decoded"), "read", "decode_failed"),
        (ProbeError("not_audio", "not a readable audio file"), "read", "not_audio"),
        (KeyError("bug"), "write", "internal_error"),
    ],
)
def test_every_failure_has_its_reason_on_redact_dlq(error: BaseException, phase, reason: str) -> None:
    assert reason_for(error, phase)[0] == reason
    payload = encode(transcript([CARD]))
    letter = letter_for(error, phase, payload, b"2026/12/03/call-7", SOURCE).letter
    assert (letter.stage, letter.reason, letter.source) == ("redact", reason, SOURCE)
    assert letter.original_payload == payload  # the transcript is kept for a redrive
    jsonschema.validate(orjson.loads(encode(letter)), load_schema("dead_letter"))


def test_a_malformed_transcript_is_a_letter_not_an_exception() -> None:
    out = plan_payload(b"{not json", b"k", TARGET, SOURCE)
    assert not isinstance(out, (Redact, NothingToRedact))
    assert isinstance(out.letter, DeadLetter) and out.letter.reason == "malformed_transcript"
    bad_roles = plan_payload(encode(transcript([CARD], roles="left=agent,7=customer")), b"k", TARGET, SOURCE)
    assert not isinstance(bad_roles, (Redact, NothingToRedact)) and bad_roles.letter.reason == "malformed_transcript"


def test_the_copy_metadata_is_ascii_and_names_the_source_content() -> None:
    p = plan(transcript([CARD]), TARGET)
    assert isinstance(p, Redact)
    assert copy_metadata(p, "silence") == {
        "callqa-source-etag": "abc123",
        "callqa-source-version": "v3",
        "callqa-redacted-with": "silence",
    }


def stereo_wav(subtype: str = "PCM_16", fmt: str = "WAV", seconds: int = 10) -> tuple[bytes, np.ndarray]:
    samples = np.random.default_rng(5).integers(-12000, 12000, (8000 * seconds, 2), dtype=np.int16)
    buf = io.BytesIO()
    sf.write(buf, samples, 8000, subtype=subtype, format=fmt)
    return buf.getvalue(), samples


def test_one_copy_function_bytes_and_name_the_same_as_the_embedded_file(tmp_path) -> None:
    data, original = stereo_wav()
    (tmp_path / "call-7.wav").write_bytes(data)
    ref = FileStore.ref_for(tmp_path / "call-7.wav")
    call = RoutedCall(
        call_id="call-7",
        object=ref,
        bucket="short",
        duration_s=10.0,
        sample_rate_hz=8000,
        channels=2,
        frames=80000,
        container="WAV",
        codec="PCM_16",
        roles={"0": "agent", "1": "customer"},
    )
    t = transcript([CARD, CVV])
    p = plan(t, TARGET)
    assert isinstance(p, Redact)
    info = probe_recording(data)
    check_matches(info, t)
    copy = redacted_copy(data, info, p.channel_spans, p.key, "silence")
    assert (copy.name, copy.format, copy.subtype, copy.converted, copy.content_type) == (
        p.key,
        "WAV",
        "PCM_16",
        False,
        "audio/wav",
    )
    written = write_redacted(FileStore(), call, t, tmp_path / "out", "call-7.wav")
    assert written is not None and written.path.read_bytes() == copy.data  # embedded and distributed: one cut
    assert sorted(p.channel_spans, key=lambda s: s.start_s) == sorted(spans_of(call, t), key=lambda s: s.start_s)
    redacted, _ = sf.read(io.BytesIO(copy.data), dtype="int16")
    lo, hi = int(np.floor((4.7 - GUARD_S) * 8000)), int(np.ceil((7.0 + GUARD_S) * 8000))
    assert not redacted[lo:hi, 1].any() and np.array_equal(redacted[:, 0], original[:, 0])
    assert np.array_equal(
        redacted[hi : int(np.floor((9.1 - GUARD_S) * 8000)), 1], original[hi : int(np.floor((9.1 - GUARD_S) * 8000)), 1]
    )
    assert info_of(call) == info


def test_a_lossy_copy_is_named_wav_and_a_huge_or_broken_one_is_refused() -> None:
    p = plan(transcript([CARD]), TARGET)
    assert isinstance(p, Redact)
    ogg, _ = stereo_wav("VORBIS", "OGG")
    copy = redacted_copy(ogg, probe_recording(ogg), p.channel_spans, p.key)
    assert copy.name == p.key + ".wav" and (copy.format, copy.subtype, copy.converted) == ("WAV", "PCM_16", True)
    data, _ = stereo_wav()
    with pytest.raises(CopyTooLarge, match="redact_max_copy_bytes"):
        redacted_copy(data, probe_recording(data), p.channel_spans, p.key, max_bytes=100_000)
    with pytest.raises(UnreadableRecording, match="channel"):
        check_matches(probe_recording(data), transcript([CARD], channels=1, roles=None))
    with pytest.raises(ProbeError):
        probe_recording(b"ID3 definitely not audio" * 10)


def test_a_redact_letter_is_redriven_to_redact_retry_for_the_group_that_failed_it() -> None:
    from pipeline.ops.dlq import Selection, StoredLetter, plan_redrive
    from pipeline.stages.outputs import stamped

    letter = stamped(
        letter_for(StorageUnavailable("down"), "read", encode(transcript([CARD])), b"c7", SOURCE).letter,
        [],
        "redact-r2",
    )
    (action,) = plan_redrive([StoredLetter("redact.dlq", 0, 4, letter)], Selection(), max_attempts=3)
    assert (action.kind, action.topic, action.partition) == ("redrive", "redact.retry", None)
    assert ("callqa-retry-group", b"redact-r2") in action.headers


def test_the_settings_refuse_an_absolute_prefix_and_an_unknown_mode() -> None:
    from pipeline.config import load_settings
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="redact_prefix"):
        load_settings(redact_prefix="/copies/")
    with pytest.raises(ConfigError, match="redact_with"):
        load_settings(redact_with="beep")
    assert load_settings(redact_prefix="copies/").redact_prefix == "copies/"
