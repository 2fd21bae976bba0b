"""Every failure kind through both runners: the Kafka worker + Faust QA mapping, and the embedded runner.

One list of cases; each runs the same routed-call events (what audio.bucket.* carries)
through the distributed path (the real worker with fake Kafka clients, its transaction
outputs then through the QA stage's output mapping) and through the embedded runner,
and both must give the same transcripts, findings and dead letters (reason and stage).
Files are real and decoded for real; the engine is a small fake, so a case can make it fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pytest
import soundfile as sf
from confluent_kafka import TopicPartition

from pipeline.adapters.file_store import FileStore
from pipeline.config import Settings
from pipeline.events import DeadLetter, QAResult, RoutedCall, Transcript, decode, encode
from pipeline.qa import CallTextError, QAEngine, load_packs
from pipeline.qa.model import CallQAResult
from pipeline.run.embedded import DEAD_LETTERS, FINDINGS, TRANSCRIPTS, EmbeddedRunner, RunOptions
from pipeline.run.qa import output_of
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.stages.batching import BatchBudget
from pipeline.stages.qa import QaStage
from pipeline.stages.routing import Buckets
from tests.fakes import FakeConsumer, FakeEngine, FakeMessage, FakeProducer

Outputs = tuple[frozenset[str], frozenset[str], frozenset[tuple[str | None, str, str]]]


class FlakyQA(QAEngine):
    """The real rule engine, told to fail on some calls the way a bad transcript or a bug would."""

    def __init__(self, fail: dict[str, Exception]) -> None:
        super().__init__(load_packs())
        self.fail = fail

    def evaluate(self, call: object) -> CallQAResult:
        error = self.fail.get(getattr(call, "call_id", ""))
        if error is not None:
            raise error
        return super().evaluate(call)  # type: ignore[arg-type]


@dataclass
class Case:
    name: str
    events: Callable[[Path], list[bytes]]  # routed-call events over files written into the folder
    expect: Outputs
    engine_fails: Callable[[str], bool] = lambda call_id: False
    qa_fails: dict[str, Exception] = field(default_factory=dict)


def wav(folder: Path, name: str, data: bytes | None = None) -> Path:
    path = folder / name
    if data is not None:
        path.write_bytes(data)
    else:
        tone = 0.1 * np.sin(np.linspace(0, 2000, 16000, dtype=np.float32))
        sf.write(path, np.stack([tone, tone], axis=1), 8000, subtype="PCM_16")
    return path


def event(path: Path, call_id: str) -> bytes:
    return encode(
        RoutedCall(
            call_id=call_id,
            object=FileStore.ref_for(path),
            bucket="short",
            duration_s=2.0,
            sample_rate_hz=8000,
            channels=2,
            frames=16000,
            container="WAV",
            codec="PCM_16",
            roles={"0": "agent", "1": "customer"},
        )
    )


def good(folder: Path, call_id: str) -> bytes:
    return event(wav(folder, f"{call_id}.wav"), call_id)


def ids(*names: str) -> frozenset[str]:
    return frozenset(names)


CASES = [
    Case("good calls", lambda d: [good(d, "a"), good(d, "b")], (ids("a", "b"), ids("a", "b"), frozenset())),
    Case(
        "missing object",
        lambda d: [good(d, "a"), event(d / "gone.wav", "gone")],
        (ids("a"), ids("a"), frozenset({("gone", "missing_object", "asr")})),
    ),
    Case(
        "corrupt audio",
        lambda d: [good(d, "a"), event(wav(d, "bad.wav", b"RIFF\x24\0\0\0WAVEjunk" * 8), "bad")],
        (ids("a"), ids("a"), frozenset({("bad", "decode_failed", "asr")})),
    ),
    Case(
        "engine failure on one call of a batch",
        lambda d: [good(d, "a"), good(d, "boom"), good(d, "b")],
        (ids("a", "b"), ids("a", "b"), frozenset({("boom", "asr_failed", "asr")})),
        engine_fails=lambda call_id: call_id == "boom",
    ),
    Case(
        "QA CallTextError",
        lambda d: [good(d, "a"), good(d, "odd")],
        (ids("a", "odd"), ids("a"), frozenset({("odd", "malformed_transcript", "qa")})),
        qa_fails={"odd": CallTextError("call odd: segment times 9..3 are impossible")},
    ),
    Case(
        "QA bug",
        lambda d: [good(d, "a"), good(d, "bug")],
        (ids("a", "bug"), ids("a"), frozenset({("bug", "internal_error", "qa")})),
        qa_fails={"bug": ValueError("invalid literal for int()")},
    ),
    Case(
        "undecodable event",
        lambda d: [good(d, "a"), b"{not json"],
        (ids("a"), ids("a"), frozenset({(None, "malformed_event", "asr")})),
    ),
    Case(
        "unknown schema version",
        lambda d: [good(d, "a"), orjson.dumps({**orjson.loads(good(d, "v9")), "schema_version": "9.0"})],
        (ids("a"), ids("a"), frozenset({(None, "malformed_event", "asr")})),
    ),
]


def letter_ids(letters: list[DeadLetter]) -> frozenset[tuple[str | None, str, str]]:
    # The worker keys a letter by the message key; events here carry none (the embedded runner's neither).
    return frozenset((_call_id(d), d.reason, d.stage) for d in letters)


def _call_id(letter: DeadLetter) -> str | None:
    try:
        payload = letter.original_payload
        return decode(payload, Transcript).call_id if letter.stage == "qa" else decode(payload, RoutedCall).call_id
    except Exception:  # noqa: BLE001 - an undecodable original: no call id
        return None


def distributed(payloads: list[bytes], engine: FakeEngine, qa: QAEngine) -> Outputs:
    topic = "audio.bucket.short"
    worker = AsrWorker(Settings(), WorkerOptions(bucket="short", window_ms=1, max_calls=8), engine, store=FileStore())
    consumer = FakeConsumer(
        queue=[FakeMessage(topic, 0, i, p, None) for i, p in enumerate(payloads)], assigned=[(topic, 0)]
    )
    worker.consumer = consumer
    worker.committer = worker._committer(consumer, FakeProducer)
    worker._on_assign(consumer, [TopicPartition(topic, 0)])
    try:
        while (next_batch := worker._prefetch()) is not None:
            inflight = next_batch.result()
            assert worker._commit(inflight, worker._transcribe(inflight.prepared))
    finally:
        worker._close()
    produced = worker.committer.producer.produced
    transcripts = [v for t, _, v in produced if t == worker.output_topic]
    letters = [decode(v, DeadLetter) for t, _, v in produced if t == worker.dlq_topic]
    findings = []
    stage = QaStage(qa)
    for value in transcripts:  # the Faust QA agent's mapping, without Faust
        where, _, out = output_of(stage.evaluate_payload(value, None), None)
        if where == "findings":
            findings.append(decode(out, QAResult).call_id)
        else:
            letters.append(decode(out, DeadLetter))
    return (frozenset(decode(v, Transcript).call_id for v in transcripts), frozenset(findings), letter_ids(letters))


def embedded(payloads: list[bytes], engine: FakeEngine, qa: QAEngine, out: Path) -> Outputs:
    opts = RunOptions(out_dir=out, buckets=Buckets((30.0,), ("short", "long")), budget=BatchBudget(8, 240.0))
    EmbeddedRunner(opts, FileStore(), engine, qa).run_events(payloads)

    def lines(name: str) -> list[bytes]:
        path = out / name
        return path.read_bytes().splitlines() if path.exists() else []

    return (
        frozenset(decode(x, Transcript).call_id for x in lines(TRANSCRIPTS)),
        frozenset(decode(x, QAResult).call_id for x in lines(FINDINGS)),
        letter_ids([decode(x, DeadLetter) for x in lines(DEAD_LETTERS)]),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_runners_give_the_same_outcome(case: Case, tmp_path: Path) -> None:
    payloads = case.events(tmp_path)
    qa = FlakyQA(case.qa_fails)
    got_distributed = distributed(payloads, FakeEngine(fail=case.engine_fails), qa)
    got_embedded = embedded(payloads, FakeEngine(fail=case.engine_fails), qa, tmp_path / "out")
    assert got_distributed == case.expect
    assert got_embedded == case.expect
