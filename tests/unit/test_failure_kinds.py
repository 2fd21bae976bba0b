"""Every failure kind through every runner: the Faust router and QA steps, the Kafka worker, and the embedded runner.

One table of cases. A case gives either recordings (arrivals, as ``callqa ingest`` publishes
them) or routed-call events (what audio.bucket.* carries, to reach the ASR stage with what the
router would not pass). The distributed path runs the router's per-event step, the real worker
with fake Kafka clients, then the QA agent's per-event step, each writing what the shared output
planner (:mod:`pipeline.stages.outputs`) plans; the embedded runner runs the same inputs. Both
must give the same transcripts, findings and dead letters (call, reason and stage), including
outputs over their topic's size limit. Files are real and decoded for real; the engine is a
small fake, so a case can make it fail.
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
from pipeline.batching import BatchBudget
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import AudioArrived, DeadLetter, QAResult, RoutedCall, SourcePosition, Transcript, decode, encode
from pipeline.headers import PartitionProgress
from pipeline.qa import CallTextError, QAEngine, load_packs
from pipeline.qa.model import CallQAResult
from pipeline.run.embedded import EmbeddedRunner, RunOptions
from pipeline.run.embedded_files import DEAD_LETTERS, FINDINGS, TRANSCRIPTS
from pipeline.run.qa_step import TranscriptStep
from pipeline.run.router_step import ArrivalStep
from pipeline.run.worker import AsrWorker, WorkerOptions
from pipeline.stages.outputs import Received, Writer
from pipeline.stages.qa import QaStage
from pipeline.stages.router import ArrivalRouter
from pipeline.stages.routing import Buckets
from pipeline.stages.sizes import MessageLimits
from tests.fakes import FakeConsumer, FakeEngine, FakeMessage, FakeProducer

BUCKETS = Buckets((30.0,), ("short", "long"))
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
    files: Callable[[Path], list[Path]] | None = None  # recordings instead: they enter at the router
    limits: dict[str, int] = field(default_factory=dict)  # topic size limits that differ from the catalog's


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
        "unknown schema version",  # the reason the router gives it too
        lambda d: [good(d, "a"), orjson.dumps({**orjson.loads(good(d, "v9")), "schema_version": "9.0"})],
        (ids("a"), ids("a"), frozenset({(None, "unsupported_schema", "asr")})),
    ),
    Case(
        "object the store cannot read",  # an OSError that is no missing file: the router's fetch_failed
        lambda d: [good(d, "a"), event(_folder(d, "locked.wav"), "locked")],
        (ids("a"), ids("a"), frozenset({("locked", "fetch_failed", "asr")})),
    ),
    Case(
        "recordings that do not route",
        lambda d: [],
        (
            ids("a"),
            ids("a"),
            frozenset(
                {
                    ("empty", "empty_object", "router"),
                    ("text", "not_audio", "router"),
                    ("locked", "fetch_failed", "router"),
                }
            ),
        ),
        files=lambda d: [
            wav(d, "a.wav"),
            wav(d, "empty.wav", b""),
            wav(d, "text.wav", b"hello, not audio" * 64),
            _folder(d, "locked.wav"),
        ],
    ),
    Case(
        "routed call over its bucket topic's limit",
        lambda d: [],
        (ids(), ids(), frozenset({("a", "output_too_large", "router")})),
        files=lambda d: [wav(d, "a.wav")],
        limits={"audio.bucket.short": 1100},
    ),
    Case(
        "transcript over its topic's limit",  # dead at ASR: no QA on a transcript that was not written
        lambda d: [good(d, "a")],
        (ids(), ids(), frozenset({("a", "output_too_large", "asr")})),
        limits={"asr.transcripts": 1100},
    ),
    Case(
        "finding over its topic's limit",  # the transcript is still written
        lambda d: [good(d, "a")],
        (ids("a"), ids(), frozenset({("a", "output_too_large", "qa")})),
        limits={"qa.findings": 1100},
    ),
]


def _folder(d: Path, name: str) -> Path:
    """A path the local store stats but cannot read (a directory): reading it raises IsADirectoryError."""
    path = d / name
    path.mkdir()
    return path


def letter_ids(letters: list[DeadLetter]) -> frozenset[tuple[str | None, str, str]]:
    # The worker keys a letter by the message key; events here carry none (the embedded runner's neither).
    return frozenset((_call_id(d), d.reason, d.stage) for d in letters)


def _call_id(letter: DeadLetter) -> str | None:
    try:
        payload = letter.original_payload
        if letter.stage == "router":
            arrival = decode(payload, AudioArrived)
            return arrival.metadata.get("call-id") or Path(arrival.object.key).stem
        return decode(payload, Transcript).call_id if letter.stage == "qa" else decode(payload, RoutedCall).call_id
    except Exception:  # noqa: BLE001 - an undecodable original: no call id
        return None


def limits_of(case: Case) -> MessageLimits:
    return MessageLimits({**MessageLimits.from_catalog(load_catalog(BUCKETS.names)).by_topic, **case.limits})


def embedded_runner(out: Path, engine: FakeEngine, qa: QAEngine, limits: MessageLimits) -> EmbeddedRunner:
    opts = RunOptions(out_dir=out, buckets=BUCKETS, budget=BatchBudget(8, 240.0), limits=limits)
    return EmbeddedRunner(opts, FileStore(), engine, qa)


def routed(
    files: list[Path], limits: MessageLimits, arrival: Callable[[Path], Received]
) -> tuple[list[bytes], list[DeadLetter]]:
    """The recordings through the Faust router's step: the bucket records and the router's letters."""
    router = ArrivalRouter(store=FileStore(), buckets=BUCKETS, partitions_of=lambda bucket: 1, max_duration_s=3600)
    step = ArrivalStep(router, Writer(limits, "callqa-router"), PartitionProgress(), "router.retry")
    events, letters = [], []
    for offset, path in enumerate(files):
        received = arrival(path)
        received = Received(
            received.payload, received.key, SourcePosition(topic="audio.arrivals", partition=0, offset=offset)
        )
        for record in step.plan(step.route(received, set()), received):
            if record.letter is not None:
                letters.append(record.letter)
            elif record.topic.startswith("audio.bucket."):
                assert record.topic == "audio.bucket.short" and record.headers  # stamped with progress
                events.append(record.value)
    return events, letters


def distributed(
    payloads: list[bytes], engine: FakeEngine, qa: QAEngine, limits: MessageLimits, letters: list[DeadLetter]
) -> Outputs:
    topic = "audio.bucket.short"
    worker = AsrWorker(Settings(), WorkerOptions(bucket="short", window_ms=1, max_calls=8), engine, store=FileStore())
    worker.limits = limits
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
    letters = [*letters, *(decode(v, DeadLetter) for t, _, v in produced if t == worker.dlq_topic)]
    findings = []
    step = TranscriptStep(QaStage(qa), Writer(limits, "callqa-qa"), "qa.retry")
    for offset, value in enumerate(transcripts):  # the Faust QA agent's handling, without Faust
        source = SourcePosition(topic="asr.transcripts", partition=0, offset=offset)
        for record in step.handle(Received(value, None, source)):
            if record.letter is not None:
                letters.append(record.letter)
            else:
                assert record.topic == "qa.findings"
                findings.append(decode(record.value, QAResult).call_id)
    return (frozenset(decode(v, Transcript).call_id for v in transcripts), frozenset(findings), letter_ids(letters))


def embedded(runner: EmbeddedRunner, case: Case, folder: Path, out: Path) -> Outputs:
    if case.files is not None:
        runner.run([FileStore.ref_for(p) for p in case.files(folder)], lambda calls: lambda done: None)
    else:
        runner.run_events(case.events(folder))

    def lines(name: str) -> list[bytes]:
        path = out / name
        return path.read_bytes().splitlines() if path.exists() else []

    return (
        frozenset(decode(x, Transcript).call_id for x in lines(TRANSCRIPTS)),
        frozenset(decode(x, QAResult).call_id for x in lines(FINDINGS)),
        letter_ids([decode(x, DeadLetter) for x in lines(DEAD_LETTERS)]),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_runner_gives_the_same_outcome(case: Case, tmp_path: Path) -> None:
    limits = limits_of(case)
    qa = FlakyQA(case.qa_fails)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    runner = embedded_runner(out, FakeEngine(fail=case.engine_fails), qa, limits)
    if case.files is not None:
        payloads, router_letters = routed(case.files(inputs), limits, lambda p: runner.arrival(FileStore.ref_for(p)))
    else:
        payloads, router_letters = case.events(inputs), []
    got_distributed = distributed(payloads, FakeEngine(fail=case.engine_fails), qa, limits, router_letters)
    for path in list(inputs.iterdir()):  # the embedded run writes its inputs afresh
        path.rmdir() if path.is_dir() else path.unlink()
    got_embedded = embedded(runner, case, inputs, out)
    assert got_distributed == case.expect
    assert got_embedded == case.expect
