"""No clear-text PII at rest by default (issue 10 item 10): transcripts redacted before they leave
the worker or the embedded runner, secrets never in a loggable settings view, stack.env owner-only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import orjson
import pytest

from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import CallTranscript
from pipeline.asr.transcript import Segment as AsrSegment
from pipeline.config import Settings, write_env_file
from pipeline.events import DeadLetter, ModelInfo, ObjectRef, Segment, Transcript, decode, encode
from pipeline.stages.redaction import redact_transcript
from tests.fakes import FakeEngine, FakeMessage, assign, fetch, routed


def call(*texts: tuple[str, float, float]) -> Transcript:
    return Transcript(call_id="c", object=ObjectRef(bucket="b", key="c.wav"), duration_s=60.0, channels=2,
                      segments=[Segment(role="customer", channel=1, start_s=a, end_s=b, text=text)
                                for text, a, b in texts], model=ModelInfo(name="m", version="1"))


def text_of(t: Transcript) -> str:
    return " ".join(s.text for s in t.segments)


def test_a_card_number_is_masked_and_reported_by_type_only() -> None:
    t = redact_transcript(call(("my card is 4532 0151 1283 0366 thanks", 1.0, 5.0)))
    assert "4532" not in text_of(t) and "[CARD]" in text_of(t)
    assert [p.type for p in t.pii] == ["bank_card"] and t.redacted


def test_a_card_length_number_failing_luhn_is_still_masked() -> None:
    t = redact_transcript(call(("it is 4532 0151 1283 0367", 1.0, 5.0)))
    assert not any(ch.isdigit() for ch in text_of(t)), text_of(t)


def test_a_number_split_across_segments_is_masked() -> None:
    t = redact_transcript(call(("my card is 4532 0151", 1.0, 3.0), ("1283 0366", 4.0, 6.0)))
    assert not any(ch.isdigit() for ch in text_of(t)), text_of(t)


def test_numbers_as_the_second_decode_writes_them_are_masked() -> None:
    for text in ("My card number is 6, 2, 6, 4, 7, 9, 1, 6, 3, 6, 9, 4, 6, 2, 9, 9.",  # fails Luhn
                 "My mobile number is 4, 1, 10, 6, 8, 4, 8, 10, 8.",  # damaged, taken on its cue
                 "I read it as 6, 2, 6, 4, 7, 9, 1, 6, 0, 3, 0, 0, 1."):  # no cue, no shape: the backstop
        t = redact_transcript(call((text, 1.0, 9.0)))
        assert not any(ch.isdigit() for ch in text_of(t)), text_of(t)


def test_short_numbers_are_kept() -> None:
    assert text_of(redact_transcript(call(("I paid 250 dollars on the 3rd", 1.0, 3.0)))) == "I paid 250 dollars on the 3rd"


def test_the_worker_publishes_only_the_redacted_transcript(worker) -> None:
    worker.stage.engine = FakeEngine(texts={"c0-0": "card 4532 0151 1283 0366"})
    assign(worker, 0)
    assert worker._commit(*fetch(worker, (0, 0)))
    [(topic, _, value)] = worker.committer.producer.produced
    assert topic == worker.output_topic and b"4532" not in value
    assert decode(value, Transcript).redacted


def test_raw_transcripts_only_when_an_operator_enables_them(worker) -> None:
    worker.settings = Settings(publish_raw_transcripts=True)
    worker.committer = worker._committer(worker.consumer, type(worker.committer.producer))
    worker.stage.engine = FakeEngine(texts={"c0-0": "card 4532 0151 1283 0366"})
    assign(worker, 0)
    assert worker._commit(*fetch(worker, (0, 0)))
    assert [topic for topic, _, _ in worker.committer.producer.produced] == [worker.output_topic,
                                                                             "asr.transcripts.raw"]


def test_settings_view_masks_every_secret() -> None:
    cfg = Settings(s3_secret_key="s3-hidden", kafka_config={
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----hidden", "sasl.oauthbearer.config": "clientSecret=hidden",
        "sasl.password": "hidden", "ssl.keystore.password": "hidden", "my.client.secret": "hidden",
        "security.protocol": "SASL_SSL"})
    view = json.dumps(cfg.redacted())
    assert "hidden" not in view
    assert cfg.redacted()["kafka_config"]["security.protocol"] == "SASL_SSL"


def test_stack_env_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "stack.env"
    write_env_file(path, {"s3_secret_key": "x"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_env_file(path, {"s3_secret_key": "y"})  # rewritten: still 0600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "y" in path.read_text()


def test_qa_finds_the_same_pii_in_the_redacted_transcript_as_in_the_raw_one() -> None:
    from pipeline.qa import QAEngine

    qa = QAEngine.from_paths()
    raw = call(("my card is 4532 0151 1283 0366", 1.0, 5.0), ("and it is 4532 0151 1283 0367", 6.0, 9.0))
    masked = redact_transcript(raw)
    assert not any(ch.isdigit() for ch in text_of(masked))

    def pii_findings(t: Transcript) -> list[tuple]:
        result = qa.evaluate(t)
        return sorted((f.rule_id, f.start_s, f.end_s, f.confidence) for f in result.findings if "pii" in f.rule_id
                      or "card" in f.rule_id)

    assert pii_findings(masked) == pii_findings(raw) and pii_findings(raw)
    assert sorted((p.type, p.start_s, p.confidence) for p in qa.evaluate(masked).pii) == \
        sorted((p.type, p.start_s, p.confidence) for p in qa.evaluate(raw).pii)


def test_redaction_runs_on_the_compute_thread_and_the_commit_only_sends_bytes(worker, monkeypatch) -> None:
    import threading

    import pipeline.stages.asr as asr_stage

    threads = []
    real = asr_stage.redact_transcript

    def recorded(t: Transcript) -> Transcript:
        threads.append(threading.current_thread().name)
        return real(t)

    monkeypatch.setattr(asr_stage, "redact_transcript", recorded)
    worker.stage.engine = FakeEngine(texts={"c0-0": "card 4532 0151 1283 0366"})
    assign(worker, 0)
    worker.consumer.queue.append(FakeMessage("audio.bucket.short", 0, 0, encode(routed("c0-0"))))
    inflight = worker._prefetch().result()
    batch = worker.compute.submit(worker._transcribe, inflight.prepared).result()
    assert threads == ["engine_0"]  # the worker's compute thread, not the polling one
    [done] = batch.transcribed
    assert b"4532" not in done.value and "4532" in done.transcript.segments[0].text
    assert worker._commit(inflight, batch)
    assert threads == ["engine_0"]  # nothing redacted again at commit
    [(_, _, value)] = worker.committer.producer.produced
    assert value is done.value


def test_a_transcript_whose_redaction_fails_is_dead_lettered_not_published(worker, monkeypatch) -> None:
    import pipeline.stages.asr as asr_stage

    def broken(t: Transcript) -> Transcript:
        raise ValueError("a redaction bug")

    monkeypatch.setattr(asr_stage, "redact_transcript", broken)
    worker.stage.engine = FakeEngine(texts={"c0-0": "card 4532 0151 1283 0366"})
    assign(worker, 0)
    assert worker._commit(*fetch(worker, (0, 0)))
    [(topic, _, value)] = worker.committer.producer.produced
    assert topic == worker.dlq_topic and decode(value, DeadLetter).reason == "internal_error"


def _digit_values(text: str) -> list[int]:
    """Every character that reads as a digit, whatever its script (४, ٤, ４, ④, ⁴, 𝟒)."""
    import unicodedata

    return [v for ch in text if (v := unicodedata.digit(ch, -1)) >= 0]


@pytest.mark.parametrize(
    "digits",
    ["2345 6789 0123", "٢٣٤٥ ٦٧٨٩ ٠١٢٣", "२३४५ ६७८९ ०१२३", "２３４５ ６７８９ ０１２３", "②③④⑤ ⑥⑦⑧⑨ ⓪①②③",
     "²³⁴⁵ ⁶⁷⁸⁹ ⁰¹²³", "𝟐𝟑𝟒𝟓 𝟔𝟕𝟖𝟗 𝟎𝟏𝟐𝟑"],
)
def test_the_backstop_masks_a_long_digit_run_of_any_script(digits: str) -> None:
    # twelve digits no detector takes (no cue, no checksum, no phone plan): only the backstop masks them
    t = redact_transcript(call((f"the reference is {digits} okay", 1.0, 5.0)))
    assert text_of(t) == "the reference is [NUMBER] okay"


class ScriptedEngine(FakeEngine):
    """Says the segments ``texts[call_id]`` gives: (channel, start_s, end_s, text)."""

    @staticmethod
    def _say(call: CallAudio, texts: dict) -> CallTranscript:  # type: ignore[override]
        segments = [AsrSegment(role=call.roles[ch], channel=ch, start_s=a, end_s=b, text=text)
                    for ch, a, b, text in texts[call.call_id]]
        duration_s = call.samples.shape[1] / call.sample_rate
        return CallTranscript(call.call_id, segments, dict.fromkeys(range(len(call.roles)), "en"), "fake", "1",
                              {"asr_s": 0.0}, duration_s)


AT_REST_CALLS = {
    "stereo": [
        (1, 1.0, 3.0, "call me on ٤١٥ ٥٥٥ ٢٦٧١"),
        (1, 4.0, 6.0, "my card is ४५३२ ०१५१ १२८३ ०३६६"),
        (1, 7.0, 9.0, "my social is ٥٢٣-٤٥-٦٧٨٩ and the cvv is १२٣"),
        (1, 10.0, 12.0, "it's 4532 0151"),  # the agent reads it back, the customer resumes 5 s later
        (0, 12.5, 16.5, "four five three two, zero one five one, yes, go on"),
        (1, 17.0, 19.0, "1283 0366"),
        (1, 20.0, 22.0, "the reference is ②③④⑤ ⑥⑦⑧⑨ ⓪①②③"),
    ],
    "mono": [
        (0, 1.0, 3.0, "it's 4532 0151"),
        (0, 3.5, 4.0, "go on"),
        (0, 4.5, 6.5, "1283 0366 and my mobile is ４１５ ５５５ ２６７１"),
    ],
}
CLEAR = ("4532", "0151", "1283", "0366", "2671", "6789")  # ASCII digit groups of the numbers said


def test_no_digits_of_any_script_at_rest_after_an_embedded_run(tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    from pipeline.adapters.file_store import FileStore
    from pipeline.batching import BatchBudget
    from pipeline.qa import QAEngine
    from pipeline.run.embedded import EmbeddedRunner, RunOptions
    from pipeline.run.embedded_files import FINDINGS, TRANSCRIPTS
    from pipeline.stages.routing import Buckets

    rng = np.random.default_rng(0)
    (tmp_path / "in").mkdir()
    for name, channels in (("stereo", 2), ("mono", 1)):  # channels differ: a copied pair would merge into one
        sf.write(tmp_path / "in" / f"{name}.wav", rng.normal(0, 0.01, (8000 * 24, channels)), 8000)
    opts = RunOptions(out_dir=tmp_path / "out", buckets=Buckets((30.0, 120.0), ("short", "medium", "long")),
                      budget=BatchBudget(8, 240.0), metadata={"roles": "left=agent,right=customer"})
    runner = EmbeddedRunner(opts, FileStore(), ScriptedEngine(texts=AT_REST_CALLS), QAEngine.from_paths())
    summary = runner.run([FileStore.ref_for(p) for p in sorted((tmp_path / "in").iterdir())],
                         lambda calls: lambda finished: None)
    assert summary.transcribed == 2
    transcripts = [decode(line, Transcript) for line in (opts.out_dir / TRANSCRIPTS).read_bytes().splitlines()]
    said = [s.text for t in transcripts for s in t.segments]
    assert "go on" in said and any("[CARD]" in s for s in said)  # the words stay, the numbers go
    for name in (TRANSCRIPTS, FINDINGS, "report.html"):
        text = (opts.out_dir / name).read_text()
        assert not [ch for ch in text if not ch.isascii() and _digit_values(ch)], name  # no digit of another script
        assert not [group for group in CLEAR if group in text], name
    findings = [orjson.loads(line) for line in (opts.out_dir / FINDINGS).read_bytes().splitlines()]
    assert {f["call_id"]: sorted({p["type"] for p in f["pii"]}) for f in findings} == {
        "stereo": ["bank_card", "card_secret", "phone", "us_ssn"], "mono": ["bank_card", "phone"]}


def test_qa_on_a_raw_transcript_quotes_no_long_digit_run() -> None:
    # a transcript not redacted by a worker (raw, or written before 1.1): the QA stage's evidence
    # and redacted copy get the same backstop as the published transcript
    from pipeline.qa import QAEngine

    raw = Transcript(call_id="c", object=ObjectRef(bucket="b", key="c.wav"), duration_s=60.0, channels=2,
                     segments=[Segment(role="agent", channel=0, start_s=1.0, end_s=6.0,
                                       text="This fund has guaranteed returns, your reference is ٢٣٤٥ ٦٧٨٩ ٠١٢٣.")],
                     model=ModelInfo(name="m", version="1"))
    result = QAEngine.from_paths().evaluate(raw)
    evidence = [f.evidence for f in result.findings if f.evidence]
    assert evidence and [s.text for s in result.redacted_segments] == [
        "This fund has guaranteed returns, your reference is [NUMBER]."]
    assert not [e for e in evidence if _digit_values(e)], evidence


def test_a_long_run_the_model_cut_over_two_segments_is_masked_in_both() -> None:
    # a resident ID whose cue and digits were misheard (20 digits: no kind takes it), cut at a pause
    t = redact_transcript(call(("全份证号马是32010211967", 30.4, 36.3), ("618102010", 36.3, 39.5)))
    assert not any(ch.isdigit() for ch in text_of(t)), text_of(t)
    assert [(p.type, p.start_s, p.end_s) for p in t.pii] == [
        ("unclassified_number", 30.4, 36.3), ("unclassified_number", 36.3, 39.5)]


@pytest.mark.parametrize(
    "first, second, gap_s",
    [
        ("I paid 250", "1234 5678 later", 0.5),  # 3 + 8 digits: short of a long run
        ("my code is 4532 0151", "1283 0366", 12.0),  # a long pause: not one run
    ],
)
def test_runs_apart_or_short_together_stay(first: str, second: str, gap_s: float) -> None:
    t = redact_transcript(call((first, 1.0, 3.0), (second, 3.0 + gap_s, 6.0 + gap_s)))
    assert text_of(t) == f"{first} {second}" and t.pii == []


def test_a_long_run_is_masked_over_the_other_partys_interjection_on_a_mono_call() -> None:
    # one channel, two roles: the agent's "mm-hmm" between the pieces breaks the detector's join,
    # the backstop groups by party and still masks both pieces
    segments = [
        Segment(role="customer", channel=0, start_s=0.0, end_s=3.0, text="it is 4532 1234"),
        Segment(role="agent", channel=0, start_s=3.1, end_s=3.5, text="mm-hmm"),
        Segment(role="customer", channel=0, start_s=3.6, end_s=6.0, text="5678 9012 5555."),
    ]
    t = redact_transcript(call().model_copy(update={"segments": segments, "channels": 1}))
    assert [s.text for s in t.segments] == ["it is [NUMBER]", "mm-hmm", "[NUMBER]."]
    assert [p.type for p in t.pii] == ["unclassified_number", "unclassified_number"]
