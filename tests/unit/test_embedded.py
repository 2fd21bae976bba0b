"""Embedded mode on the bundled sample calls: outputs, bad files listed, resume after a crash."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from pipeline.adapters.file_store import FileStore
from pipeline.asr import Engine
from pipeline.batching import BatchBudget
from pipeline.qa import CallTextError, QAEngine
from pipeline.run.embedded import EmbeddedRunner, RunOptions
from pipeline.run.embedded_files import DEAD_LETTERS, FINDINGS, TRANSCRIPTS
from pipeline.stages.routing import Buckets

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "calls"


def run(engine: Engine, inputs: list[Path], out: Path):
    opts = RunOptions(out_dir=out, buckets=Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong")),
                      budget=BatchBudget(8, 240.0), metadata={"roles": "left=agent,right=customer"})
    runner = EmbeddedRunner(opts, FileStore(), engine, QAEngine.from_paths([]))
    done: list[int] = []
    summary = runner.run([FileStore.ref_for(p) for p in inputs], lambda calls: lambda finished: done.append(len(finished)))
    return summary, done


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def test_run_resume_and_bad_files(engine: Engine, tmp_path: Path) -> None:
    calls = tmp_path / "in"
    calls.mkdir()
    for name in ("sample-02-no-notice.wav", "sample-03-mis-selling.wav"):
        shutil.copy(SAMPLES / name, calls / name)
    (calls / "broken.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEnonsense")
    out = tmp_path / "out"
    inputs = sorted(calls.iterdir())

    summary, progress = run(engine, inputs, out)
    assert (summary.calls, summary.transcribed, summary.dead) == (3, 2, 1)
    assert sum(progress) == 2
    transcripts = {t["call_id"]: t for t in lines(out / TRANSCRIPTS)}
    assert set(transcripts) == {"sample-02-no-notice", "sample-03-mis-selling"}
    t = transcripts["sample-03-mis-selling"]
    assert {s["role"] for s in t["segments"]} == {"agent", "customer"}
    assert "guarantee" in " ".join(s["text"] for s in t["segments"] if s["role"] == "agent").lower()
    findings = {f["call_id"]: {x["rule_id"] for x in f["findings"]} for f in lines(out / FINDINGS)}
    assert "misselling.guaranteed_returns" in findings["sample-03-mis-selling"]
    assert "disclosure.recording_notice" in findings["sample-02-no-notice"]
    assert [d["reason"] for d in lines(out / DEAD_LETTERS)] == ["corrupt_header"]
    summary_txt = (out / "summary.txt").read_text()
    assert "broken.wav: corrupt_header" in summary_txt
    efficiency = float(summary_txt.split("padding efficiency: ")[1].split()[0])
    assert 0.3 < efficiency <= 1.0
    assert "<svg" in (out / "report.html").read_text()

    # A rerun (say after a crash) transcribes nothing again and lists the bad file once.
    summary, progress = run(engine, inputs, out)
    assert (summary.skipped_done, summary.transcribed) == (2, 0)
    assert len(lines(out / TRANSCRIPTS)) == 2 and len(lines(out / DEAD_LETTERS)) == 1
    # A changed file is new work.
    shutil.copy(SAMPLES / "sample-01-clean.wav", calls / "sample-02-no-notice.wav")
    summary, _ = run(engine, inputs, out)
    assert summary.transcribed == 1


def test_an_engine_or_qa_failure_costs_only_that_call(engine: Engine, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls = tmp_path / "in"
    calls.mkdir()
    for name in ("sample-01-clean.wav", "sample-02-no-notice.wav", "sample-03-mis-selling.wav"):
        shutil.copy(SAMPLES / name, calls / name)
    batch = engine.transcribe_batch

    def transcribe_batch(audios):  # noqa: ANN001, ANN202 - the engine chokes on one call
        if any(a.call_id == "sample-02-no-notice" for a in audios):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return batch(audios)

    evaluate = QAEngine.evaluate

    def qa_evaluate(self, call):  # noqa: ANN001, ANN202 - the rules reject one transcript
        if call.call_id == "sample-03-mis-selling":
            raise CallTextError("call sample-03-mis-selling: segment times 9..3 are impossible")
        return evaluate(self, call)

    monkeypatch.setattr(engine, "transcribe_batch", transcribe_batch)
    monkeypatch.setattr(QAEngine, "evaluate", qa_evaluate)
    out = tmp_path / "out"
    inputs = sorted(calls.iterdir())
    summary, _ = run(engine, inputs, out)

    letters = {(d["original_key"], d["reason"], d["stage"]) for d in lines(out / DEAD_LETTERS)}
    assert letters == {("sample-02-no-notice", "asr_failed", "asr"),
                       ("sample-03-mis-selling", "malformed_transcript", "qa")}
    # The QA failure still leaves its transcript (as asr.transcripts would hold it); the engine's does not.
    assert {t["call_id"] for t in lines(out / TRANSCRIPTS)} == {"sample-01-clean", "sample-03-mis-selling"}
    assert [f["call_id"] for f in lines(out / FINDINGS)] == ["sample-01-clean"]
    assert (summary.transcribed, summary.dead) == (2, 2)
    assert f"{calls / 'sample-02-no-notice.wav'}: asr_failed" in (out / "summary.txt").read_text()

    summary, _ = run(engine, inputs, out)  # a rerun retries the failed call and lists it once
    assert (summary.skipped_done, summary.transcribed) == (2, 0)
    assert len(lines(out / DEAD_LETTERS)) == 2
    # the QA failure is still open (its call is transcribed, but has no findings): both still fail the run
    assert summary.reasons == {"asr_failed": 1, "malformed_transcript": 1}


def test_same_named_files_in_two_folders_are_two_calls(engine: Engine, tmp_path: Path) -> None:
    from pipeline.adapters.recordings import plan_uploads, recording_names
    from pipeline.run.embedded_inputs import local_call_ids

    calls = tmp_path / "in"
    for folder in ("a", "b"):
        (calls / folder).mkdir(parents=True)
    shutil.copy(SAMPLES / "sample-01-clean.wav", calls / "a" / "call.wav")
    shutil.copy(SAMPLES / "sample-03-mis-selling.wav", calls / "b" / "call.wav")
    # ingest keeps the folders in the object keys
    assert [r.key for r in plan_uploads(recording_names([calls]), "", {})] == ["a/call.wav", "b/call.wav"]
    opts = RunOptions(out_dir=tmp_path / "out", buckets=Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong")),
                      budget=BatchBudget(8, 240.0), metadata={"roles": "left=agent,right=customer"},
                      call_ids=local_call_ids([str(calls)]))
    summary = EmbeddedRunner(opts, FileStore(), engine, None).run(
        [FileStore.ref_for(p) for p, _ in recording_names([calls])], lambda calls: lambda finished: None)
    assert summary.transcribed == 2
    transcripts = {t["call_id"]: t for t in lines(tmp_path / "out" / TRANSCRIPTS)}
    assert set(transcripts) == {"a/call", "b/call"}
    assert "guarantee" in " ".join(s["text"] for s in transcripts["b/call"]["segments"]).lower()


def test_a_partial_last_line_from_a_crash_is_repaired_and_said(engine: Engine, tmp_path: Path) -> None:
    calls = tmp_path / "in"
    calls.mkdir()
    for name in ("sample-01-clean.wav", "sample-02-no-notice.wav"):
        shutil.copy(SAMPLES / name, calls / name)
    out = tmp_path / "out"
    inputs = sorted(calls.iterdir())
    run(engine, inputs[:1], out)
    whole = (out / TRANSCRIPTS).read_bytes()
    # killed while writing the second call's lines: half a transcript line, half a findings line
    (out / TRANSCRIPTS).write_bytes(whole + whole[: len(whole) // 2])
    with open(out / FINDINGS, "ab") as f:
        f.write(b'{"call_id": "sample-02-no-not')
    summary, _ = run(engine, inputs, out)
    assert (summary.skipped_done, summary.transcribed) == (1, 1)
    assert [r.split(":")[0] for r in summary.repaired] == [TRANSCRIPTS, FINDINGS]
    assert sorted(t["call_id"] for t in lines(out / TRANSCRIPTS)) == ["sample-01-clean", "sample-02-no-notice"]
    assert len(lines(out / FINDINGS)) == 2
    assert "repaired transcripts.jsonl: dropped an incomplete last line" in (out / "summary.txt").read_text()


@pytest.mark.model  # the CLI loads the engine in its own process
def test_callqa_run_exits_non_zero_when_an_input_was_dead_lettered(tmp_path: Path) -> None:
    import subprocess
    import sys

    calls = tmp_path / "in"
    calls.mkdir()
    (calls / "broken.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEnonsense")
    args = [sys.executable, "-m", "pipeline.cli", "run", str(calls), "--out", str(tmp_path / "out"),
            "--device", "cpu", "--no-qa"]
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "1 input(s) not processed" in result.stderr
    assert subprocess.run([*args, "--allow-dead-letters"], cwd=root, capture_output=True, timeout=300).returncode == 0


def _transcript_line(key: str, call_id: str, **extra: object) -> bytes:
    return orjson.dumps({"schema_version": "1.1", "call_id": call_id, "object": {"bucket": "file", "key": key},
                         "duration_s": 1.0, "channels": 1, "languages": {}, "segments": [],
                         "model": {"name": "m", "version": "1"}, "timings": {}, **extra}) + b"\n"


def _letter_line(key: str, reason: str, stage: str = "router") -> bytes:
    from pipeline.events import DeadLetter, encode

    return encode(DeadLetter.of(payload=b"{}", key=key.encode(), reason=reason, message="m", stage=stage)) + b"\n"


def test_a_file_transcribed_since_it_failed_is_no_longer_listed(tmp_path: Path) -> None:
    from pipeline.run.embedded_files import open_letters

    transcripts = _transcript_line("/in/fixed.wav", "fixed") + _transcript_line("/in/b.wav", "b")
    (tmp_path / TRANSCRIPTS).write_bytes(transcripts)
    (tmp_path / DEAD_LETTERS).write_bytes(
        _letter_line("/in/fixed.wav", "truncated") + _letter_line("/in/bad.wav", "not_audio")
        + _letter_line("b", "decode_failed") + _letter_line("/in/b.wav", "not_audio"))
    assert [d.original_key for d in open_letters(tmp_path, failed_now=set())] == ["/in/bad.wav"]
    # failing in this run lists a file even though an older version of it was transcribed
    assert [d.original_key for d in open_letters(tmp_path, failed_now={("/in/b.wav", "not_audio")})] == ["/in/bad.wav", "/in/b.wav"]
    # a QA failure stays open while its call (transcribed by design) has no findings
    with open(tmp_path / DEAD_LETTERS, "ab") as f:
        f.write(_letter_line("fixed", "malformed_transcript", stage="qa"))
    assert [d.reason for d in open_letters(tmp_path, set())] == ["not_audio", "malformed_transcript"]
    assert [d.reason for d in open_letters(tmp_path, set(), evaluated={"fixed"})] == ["not_audio"]  # its letter here is not_audio
    # a file failing now for another reason is listed with this run's reason only (its older letter is not)
    with open(tmp_path / DEAD_LETTERS, "ab") as f:
        f.write(_letter_line("/in/bad.wav", "empty_object"))
    now = {("/in/bad.wav", "empty_object")}
    assert [(d.original_key, d.reason) for d in open_letters(tmp_path, now, evaluated={"fixed"})] == [
        ("/in/bad.wav", "empty_object")]


def test_a_bad_file_replaced_by_a_good_one_clears_on_the_rerun(engine: Engine, tmp_path: Path) -> None:
    calls = tmp_path / "in"
    calls.mkdir()
    (calls / "late.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEnonsense")
    out = tmp_path / "out"
    summary, _ = run(engine, [calls / "late.wav"], out)
    assert summary.reasons == {"corrupt_header": 1} and "late.wav: corrupt_header" in (out / "summary.txt").read_text()
    shutil.copy(SAMPLES / "sample-02-no-notice.wav", calls / "late.wav")  # the upload is repaired
    summary, _ = run(engine, [calls / "late.wav"], out)
    assert summary.transcribed == 1 and summary.reasons == {}  # `callqa run` exits 0
    assert "not processed" not in (out / "summary.txt").read_text()
    (calls / "late.wav").write_bytes(b"")  # and broken again: listed again
    summary, _ = run(engine, [calls / "late.wav"], out)
    assert summary.reasons == {"empty_object": 1}


def test_the_summary_names_calls_without_speech_and_says_the_list_is_the_lowest_scores(tmp_path: Path) -> None:
    from pipeline.qa import CallQAResult
    from pipeline.run.embedded_files import transcribed_index
    from pipeline.run.embedded_summary import RunSummary, render_summary

    (tmp_path / TRANSCRIPTS).write_bytes(_transcript_line("/in/quiet.wav", "quiet"))
    done, silent, _, _ = transcribed_index(tmp_path)
    assert done == {"/in/quiet.wav", "quiet"} and silent == ["quiet"]
    results = [CallQAResult(f"c{i}", None, 50.0 + i, (), (), ()) for i in range(12)]
    text = render_summary(RunSummary(calls=12), results, [], silent)
    assert "QA: 12 calls, mean score 55.5 (the lowest 10; every call in report.html)" in text
    assert "no speech found in 1 call(s): quiet\n" in text
    assert "(the lowest" not in render_summary(RunSummary(), results[:3], [])


def test_the_summary_names_calls_in_an_unsupported_language_and_leaves_them_out_of_the_mean(tmp_path: Path) -> None:
    from pipeline.qa import CallQAResult
    from pipeline.run.embedded_files import transcribed_index
    from pipeline.run.embedded_summary import RunSummary, render_summary

    note = {"language": "fr", "probability": 0.97, "channels": [0]}
    (tmp_path / TRANSCRIPTS).write_bytes(_transcript_line("/in/fr.wav", "fr", schema_version="1.2",
                                                          unsupported_language=note))
    foreign = transcribed_index(tmp_path).foreign
    assert foreign == [("fr", "fr", 0.97)]
    results = [CallQAResult("en", None, 80.0, (), (), ()), CallQAResult("fr", None, 0.0, (), (), (), judged=False)]
    text = render_summary(RunSummary(calls=2), results, [], (), foreign)
    assert "QA: 1 calls, mean score 80.0" in text
    assert "unsupported_language: 1 call(s) not judged by QA (transcribed as spoken):\n  fr: fr (probability 0.97)" in text


def test_the_summary_says_how_much_heard_speech_has_no_text_and_why(tmp_path: Path) -> None:
    from pipeline.run.embedded_files import transcribed_index
    from pipeline.run.embedded_summary import RunSummary, render_summary

    gaps = [{"channel": 1, "start_s": 42.78, "end_s": 55.07, "why": "loop"},
            {"channel": 0, "start_s": 3.0, "end_s": 4.5, "why": "no_speech"}]
    (tmp_path / TRANSCRIPTS).write_bytes(_transcript_line("/in/a.wav", "a") + _transcript_line(
        "/in/b.wav", "b", schema_version="1.2", untranscribed=gaps))
    untranscribed = transcribed_index(tmp_path).untranscribed
    assert [(c, round(s, 2), why) for c, s, why in untranscribed] == [("b", 13.79, ["loop", "no_speech"])]
    text = render_summary(RunSummary(calls=2), [], [], (), (), untranscribed)
    assert "speech without text: 13.8 s in 1 call(s) (each transcript's untranscribed):\n  b: 13.8 s (loop, no_speech)" in text


@pytest.mark.model  # the CLI loads the engine in its own process
def test_ctrl_c_stops_callqa_run_with_a_line_saying_how_to_resume(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import threading
    import time

    calls = tmp_path / "in"
    shutil.copytree(SAMPLES, calls)
    args = [sys.executable, "-m", "pipeline.cli", "run", str(calls), "--out", str(tmp_path / "out"),
            "--device", "cpu", "--max-calls", "1"]
    proc = subprocess.Popen(args, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    err = bytearray()

    def read_stderr() -> None:  # the bar redraws with \r, never a newline: read what comes
        while chunk := proc.stderr.read1(4096):
            err.extend(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    transcripts = tmp_path / "out" / TRANSCRIPTS
    deadline = time.monotonic() + 240
    # interrupted once a call is finished (one batch each: the other calls are still to come)
    while not (transcripts.exists() and b"\n" in transcripts.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    reader.join(timeout=10)
    text = err.decode()
    assert "interrupted: the calls finished so far are in" in text and "Traceback" not in text
    finished = transcripts.read_bytes().splitlines()
    assert 1 <= len(finished) < len(list(SAMPLES.glob("*.wav"))), finished  # kept, each a whole line
    assert all(orjson.loads(line) for line in finished)


def test_the_summary_names_the_file_of_a_call_that_failed_after_routing(tmp_path: Path) -> None:
    from pipeline.events import DeadLetter, ObjectRef, RoutedCall, encode
    from pipeline.run.embedded_summary import RunSummary, letter_file, render_summary

    call = RoutedCall(call_id="crashed", object=ObjectRef(bucket="file", key="/in/day 1/crashed.wav"), bucket="short",
                      duration_s=3.0, sample_rate_hz=8000, channels=1, frames=24000, container="WAV", codec="ULAW",
                      roles={"0": "mixed"})
    asr = DeadLetter.of(payload=encode(call), key=b"crashed", reason="decode_failed", message="m", stage="asr")
    router = DeadLetter.of(payload=b"{}", key=b"/in/x.wav", reason="not_audio", message="m", stage="router")
    broken = DeadLetter.of(payload=b"nonsense", key=b"c9", reason="malformed_event", message="m", stage="asr")
    assert [letter_file(d) for d in (asr, router, broken)] == ["/in/day 1/crashed.wav", "/in/x.wav", "c9"]
    assert "  /in/day 1/crashed.wav: decode_failed (m)" in render_summary(RunSummary(), [], [asr])


def test_a_ctrl_c_that_a_decoder_swallowed_stops_the_run_and_dead_letters_nothing(tmp_path: Path) -> None:
    import signal

    from pipeline.run.interrupts import Interrupts
    from tests.fakes import FakeEngine

    def swallowed(call_id: str) -> bool:
        try:
            signal.raise_signal(signal.SIGINT)  # the handler raises KeyboardInterrupt here ...
        except KeyboardInterrupt:
            pass  # ... and a C callback drops it, as soundfile's read callbacks do
        return True  # the work in hand then fails

    calls = tmp_path / "in"
    calls.mkdir()
    shutil.copy(SAMPLES / "sample-01-clean.wav", calls / "a.wav")
    out = tmp_path / "out"
    opts = RunOptions(out_dir=out, buckets=Buckets((30.0, 120.0, 600.0), ("short", "medium", "long", "xlong")),
                      budget=BatchBudget(8, 240.0))
    interrupts = Interrupts()
    runner = EmbeddedRunner(opts, FileStore(), FakeEngine(fail=swallowed), None, interrupts)
    with interrupts.watching(), pytest.raises(KeyboardInterrupt):
        runner.run([FileStore.ref_for(calls / "a.wav")], lambda calls: lambda finished: None)
    assert interrupts.seen
    assert not (out / DEAD_LETTERS).exists() or (out / DEAD_LETTERS).read_bytes() == b""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
