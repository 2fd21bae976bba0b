"""Embedded mode: the whole pipeline in one process, no broker, no object store.

The same stages as the distributed pipeline — routing stage (probe, validate,
bucket), batch budget, fetch + decode, engine, QA rules — chained in memory over
local files (or an ``s3://bucket/prefix``). Outputs in ``--out``:

- ``transcripts.jsonl`` — Transcript events, as on asr.transcripts;
- ``findings.jsonl`` — QAResult events, as on qa.findings;
- ``dead_letters.jsonl`` — every file that could not be processed, with its reason;
- ``summary.txt`` and ``report.html``;
- with ``redact_audio``, ``redacted/<the call's path>``: each call with PII, its spans cut out.

Outputs are appended and flushed batch by batch, so a rerun skips what is done. This
module only maps the stages' outcomes (:class:`~pipeline.stages.router.ArrivalRouter`,
:class:`~pipeline.stages.asr.AsrStage`, :class:`~pipeline.stages.qa.QaStage`) to these
files, so every failure gets the same reason as in the distributed pipeline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.file_store import FileStore
from pipeline.batching import BatchBudget, plan_batches
from pipeline.catalog import load_catalog
from pipeline.errors import DecodeError
from pipeline.events import AudioArrived, DeadLetter, ObjectRef, RoutedCall, Transcript, decode, encode
from pipeline.logs import get_logger
from pipeline.qa import CallQAResult, QAEngine, read_results_jsonl, write_report
from pipeline.run.interrupts import Interrupts
from pipeline.run.progress_bar import AudioProgress
from pipeline.run.redacted_audio import REDACTED_DIR, default_name, redaction_lines, write_redacted
from pipeline.stages.asr import AsrBatch, AsrInput, AsrStage, SpeechEngine, Transcribed
from pipeline.stages.audio_redaction import Mode
from pipeline.stages.outputs import Received, Record, Writer, letters, plan_evaluated, plan_route, plan_transcribed
from pipeline.stages.qa import QaStage
from pipeline.stages.router import ArrivalRouter, Routed, Skipped
from pipeline.stages.routing import Buckets
from pipeline.stages.sizes import MessageLimits
from pipeline.stages.storage import ObjectStore

log = get_logger("callqa.embedded")
TRANSCRIPTS, FINDINGS, DEAD_LETTERS = "transcripts.jsonl", "findings.jsonl", "dead_letters.jsonl"


@dataclass(frozen=True)
class RunOptions:
    out_dir: Path
    buckets: Buckets
    budget: BatchBudget
    max_duration_s: float = 4 * 3600.0
    metadata: dict[str, str] = field(default_factory=dict)  # e.g. roles, agent-id for every file
    call_ids: dict[str, str] = field(default_factory=dict)  # object key -> call id (local files: the name)
    names: dict[str, str] = field(default_factory=dict)  # object key -> path below the input folder
    redact_audio: Mode | None = None  # write redacted copies (silence or tone over the PII spans)
    # Size limits of the topics the outputs would go to in the distributed pipeline (None: the catalog's):
    # an output over its limit is dead-lettered (output_too_large) in both modes.
    limits: MessageLimits | None = None


@dataclass
class RunSummary:
    calls: int = 0
    skipped_done: int = 0
    transcribed: int = 0
    dead: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    speech_s: float = 0.0  # voiced seconds the engine computed on
    padded_s: float = 0.0  # seconds the engine computed (windows padded to their bucket)
    reasons: dict[str, int] = field(default_factory=dict)  # of the inputs still not processed
    failed_now: set[tuple[str | None, str]] = field(default_factory=set)  # (key, reason) dead in this run
    repaired: list[str] = field(default_factory=list)  # what was fixed in the outputs of a crashed run
    redacted: int = 0  # redacted copies written in this run
    redacted_as_wav: list[str] = field(default_factory=list)  # of those, the calls written as PCM_16 WAV
    redaction_failed: list[str] = field(default_factory=list)  # calls with PII whose copy could not be written

    @property
    def padding_efficiency(self) -> float:
        return self.speech_s / self.padded_s if self.padded_s else 1.0

    @property
    def rtfx(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s else 0.0


Progress = Callable[[Sequence[RoutedCall]], None]  # the calls just finished (transcribed or dead)


class EmbeddedRunner:
    def __init__(self, opts: RunOptions, store: ObjectStore, engine: SpeechEngine, qa: QAEngine | None,
                 interrupts: Interrupts | None = None) -> None:
        self.opts, self.store = opts, store
        self.router = ArrivalRouter(store=store, buckets=opts.buckets, partitions_of=lambda bucket: 1,
                                    max_duration_s=opts.max_duration_s)
        self.fetcher = Fetcher(store)
        self.interrupts = interrupts or Interrupts()
        self.asr = AsrStage(self.fetcher, engine)
        self.qa = QaStage(qa) if qa is not None else None
        # No group: a redrive is a rerun. The same planner as the distributed runners' writes the outputs.
        self.writer = Writer(opts.limits or MessageLimits.from_catalog(load_catalog(opts.buckets.names)))

    def arrival(self, ref: ObjectRef) -> Received:
        """The arrival event of an input, as ``callqa ingest`` would publish it (and keyed as it would)."""
        metadata = self.opts.metadata
        if ref.bucket == FileStore.BUCKET:  # a key is an absolute path: name the call as ingest would
            metadata = {"call-id": self.opts.call_ids.get(ref.key) or Path(ref.key).stem, **metadata}
        return Received(encode(AudioArrived(object=ref, metadata=metadata)), ref.key.encode())

    def route_all(self, refs: Iterable[ObjectRef], summary: RunSummary) -> tuple[list[RoutedCall], list[DeadLetter]]:
        """Probe every input; what is already transcribed (same content) is skipped."""
        done = _done_identities(self.opts.out_dir / TRANSCRIPTS)
        routed, dead = [], []
        for ref in refs:
            received = self.arrival(ref)
            outcome = self.router.route(received.payload, received.key, seen=done)
            summary.calls += 1
            records = plan_route(outcome, received, self.writer)
            dead += letters(records)
            if isinstance(outcome, Routed) and not letters(records):
                routed.append(outcome.call)
            elif isinstance(outcome, Skipped):
                summary.skipped_done += 1
        return routed, dead

    def run(self, refs: Iterable[ObjectRef], progress: Callable[[list[RoutedCall]], Progress]) -> RunSummary:
        started = time.perf_counter()
        summary = RunSummary()
        self.opts.out_dir.mkdir(parents=True, exist_ok=True)
        for name in (TRANSCRIPTS, FINDINGS, DEAD_LETTERS):  # a crash mid-line leaves a partial last line
            dropped = repair_tail(self.opts.out_dir / name)
            if dropped:
                summary.repaired.append(f"{name}: dropped an incomplete last line ({dropped} bytes) left by "
                                        f"an interrupted run; that call is processed again")
        routed, dead = self.route_all(refs, summary)
        if self.interrupts.seen:  # as in process(): the probe reads headers the same way
            raise KeyboardInterrupt
        on_done = progress(routed)
        with _Outputs(self.opts.out_dir, summary) as out:
            for letter in dead:
                out.letters.add(letter)
            for batch in self._batches(routed):
                self.process([AsrInput.of(c.call_id, encode(c), c.call_id.encode()) for c in batch], out)
                on_done(batch)
        summary.wall_s = time.perf_counter() - started
        self._finish(summary)
        return summary

    def run_events(self, payloads: Sequence[bytes]) -> RunSummary:
        """Routed-call events (what an audio.bucket topic carries) through the ASR and QA stages, one batch."""
        summary = RunSummary(calls=len(payloads))
        self.opts.out_dir.mkdir(parents=True, exist_ok=True)
        with _Outputs(self.opts.out_dir, summary) as out:
            self.process([AsrInput.of(f"event-{i}", p, None) for i, p in enumerate(payloads)], out)
        return summary

    def _batches(self, calls: list[RoutedCall]) -> Iterable[list[RoutedCall]]:
        """Calls of one duration bucket batch together, longest first, under the budget."""
        for bucket in self.opts.buckets.names:
            members = [c for c in calls if c.bucket == bucket]
            for batch in plan_batches(members, self.opts.budget):
                yield list(batch.items)

    def process(self, inputs: list[AsrInput[str]], out: _Outputs) -> None:
        """One batch of routed-call events through the ASR and QA stages, outcomes to the files."""
        batch: AsrBatch[str] = self.asr.transcribe(self.asr.prepare(inputs))
        if self.interrupts.seen:  # a Ctrl-C a decoder swallowed while reading: no call is dead-lettered for it
            raise KeyboardInterrupt
        out.summary.speech_s += sum(b.speech_s for b in batch.stats)
        out.summary.padded_s += sum(b.computed_s for b in batch.stats)
        received = {i.tag: Received(i.payload, i.key, i.source) for i in inputs}
        for outcome in batch.outcomes:
            records = plan_transcribed(outcome, received[outcome.tag], self.writer)
            for letter in letters(records):
                out.letters.add(letter)
            if isinstance(outcome, Transcribed) and not letters(records):
                self._keep(outcome, records[0], out)

    def _keep(self, done: Transcribed[str], record: Record, out: _Outputs) -> None:
        # no clear-text PII at rest (redacted by the ASR stage); QA sees what the distributed QA stage sees
        transcript = done.redacted
        if self.qa is not None:  # findings first: a transcript line marks the call done
            outcome = self.qa.evaluate(transcript, record.value, record.key)
            for found in plan_evaluated(outcome, Received(record.value, record.key), self.writer):
                if found.letter is not None:
                    out.letters.add(found.letter)  # the transcript is still kept, as on asr.transcripts
                else:
                    _write_line(out.findings, found.value)
        if self.opts.redact_audio is not None:  # before the transcript line: a rerun writes a missing copy
            self._redact(done, out.summary)
        _write_line(out.transcripts, record.value)
        out.summary.transcribed += 1
        out.summary.audio_s += done.call.duration_s

    def _redact(self, done: Transcribed[str], summary: RunSummary) -> None:
        name = self.opts.names.get(done.call.object.key) or default_name(done.call.object)
        try:
            written = write_redacted(self.store, done.call, done.redacted, self.opts.out_dir, name,
                                     self.opts.redact_audio or "silence")
        except Exception as exc:  # noqa: BLE001 - one recording's copy costs that copy only; it is said
            log.warning("redacted_audio_failed", call_id=done.call.call_id, error=type(exc).__name__)
            summary.redaction_failed.append(done.call.call_id)
            return
        if written is not None:
            summary.redacted += 1
            if written.converted:
                summary.redacted_as_wav.append(done.call.call_id)

    def _finish(self, summary: RunSummary) -> None:
        out = self.opts.out_dir
        results = read_results_jsonl(line.decode() for line in _lines(out / FINDINGS))
        if self.qa is not None:
            write_report(out / "report.html", results)
        done, silent, foreign = transcribed_index(out)
        dead = open_letters(out, summary.failed_now, done, {r.call_id for r in results})
        for letter in dead:
            summary.reasons[letter.reason] = summary.reasons.get(letter.reason, 0) + 1
        (out / "summary.txt").write_text(render_summary(summary, results, dead, silent, foreign))


def render_summary(summary: RunSummary, results: list[CallQAResult], dead: list[DeadLetter],
                   silent: Sequence[str] = (), foreign: Sequence[tuple[str, str, float]] = ()) -> str:
    lines = [
        f"calls seen: {summary.calls}  transcribed now: {summary.transcribed}  "
        f"already done: {summary.skipped_done}  failed: {len(dead)}",
        f"audio transcribed now: {summary.audio_s / 3600:.3f} h in {summary.wall_s:.1f} s (RTFx {summary.rtfx:.1f})",
        f"padding efficiency: {summary.padding_efficiency:.2f}",
    ]
    judged = [r for r in results if r.judged]
    if judged:
        scores = sorted(judged, key=lambda r: r.score)
        shown = f" (the lowest {min(10, len(judged))}; every call in report.html)" if len(judged) > 10 else ""
        lines.append(f"QA: {len(judged)} calls, mean score {sum(r.score for r in judged) / len(judged):.1f}{shown}")
        for r in scores[:10]:
            rules = ", ".join(sorted({f.rule_id for f in r.findings})) or "clean"
            lines.append(f"  {r.score:5.1f}  {r.call_id}  {rules}")
    if silent:  # transcribed, but the engine heard no speech: silence, tones, or a dead channel
        lines.append(f"no speech found in {len(silent)} call(s): {', '.join(silent[:20])}"
                     + (f" and {len(silent) - 20} more" if len(silent) > 20 else ""))
    if foreign:  # transcribed in its own language; no rule pack is written for it
        lines.append(f"unsupported_language: {len(foreign)} call(s) not judged by QA (transcribed as spoken):")
        lines += [f"  {call_id}: {language} (probability {p:.2f})" for call_id, language, p in foreign[:20]]
        lines += [f"  and {len(foreign) - 20} more"] if len(foreign) > 20 else []
    lines += redaction_lines(summary.redacted, summary.redacted_as_wav, summary.redaction_failed)
    lines += [f"repaired {line}" for line in summary.repaired]
    if dead:
        lines.append("not processed:")
        lines += [f"  {letter_file(d)}: {d.reason} ({d.message})" for d in dead]
    return "\n".join(lines) + "\n"


def letter_file(letter: DeadLetter) -> str | None:
    """The file a dead letter is about. Routing letters are keyed by it; the ASR and QA stages key
    theirs by call id (as on their topics), so the file comes from the event they carry."""
    kind = {"asr": RoutedCall, "qa": Transcript}.get(letter.stage)
    if kind is not None:
        try:
            return decode(letter.original_payload, kind).object.key
        except DecodeError:
            pass
    return letter.original_key


def transcribed_index(out: Path) -> tuple[set[str | None], list[str], list[tuple[str, str, float]]]:
    """The object keys and call ids transcribed in ``out``, the calls in which no speech was found,
    and the calls in a language outside the configured set (call id, language, probability)."""
    done: set[str | None] = set()
    silent: list[str] = []
    foreign: list[tuple[str, str, float]] = []
    for line in _lines(out / TRANSCRIPTS):
        t = decode(line, Transcript)
        done |= {t.object.key, t.call_id}  # routing letters carry the object key, ASR letters the call id
        if not t.segments:
            silent.append(t.call_id)
        if t.unsupported_language is not None:
            foreign.append((t.call_id, t.unsupported_language.language, t.unsupported_language.probability))
    return done, silent, foreign


def open_letters(out: Path, failed_now: set[tuple[str | None, str]], done: set[str | None] | None = None,
                 evaluated: set[str] | None = None) -> list[DeadLetter]:
    """The dead letters of inputs still not processed: for a file that failed in this run, the
    letters of this run only; for the others, those of earlier runs unless the file has been
    processed since (replaced by a good copy, say: transcribed, and for a QA failure evaluated),
    so it no longer fails the exit status."""
    done = transcribed_index(out)[0] if done is None else done
    evaluated = evaluated or set()
    failing = {key for key, _ in failed_now}
    letters = [decode(line, DeadLetter) for line in _lines(out / DEAD_LETTERS)]
    return [d for d in letters if (d.original_key, d.reason) in failed_now
            or (d.original_key not in (evaluated if d.stage == "qa" else done) and d.original_key not in failing)]


def _done_identities(path: Path) -> dict[str, float]:
    """Dedup keys (as the routing stage computes them) of calls already transcribed."""
    done = {}
    for line in _lines(path):
        done[decode(line, Transcript).object.identity] = 0.0
    return done


def _lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().splitlines() if line.strip()]


class _DeadLetters:
    """dead_letters.jsonl: a rerun lists each (file, reason) once, however often it failed."""

    def __init__(self, path: Path, out: IO[bytes], summary: RunSummary) -> None:
        self.out, self.summary = out, summary
        self.listed = {(d.original_key, d.reason) for d in (decode(line, DeadLetter) for line in _lines(path))}

    def add(self, letter: DeadLetter) -> None:
        self.summary.failed_now.add((letter.original_key, letter.reason))
        if (letter.original_key, letter.reason) not in self.listed:
            self.listed.add((letter.original_key, letter.reason))
            _write(self.out, letter)
            self.summary.dead += 1


class _Outputs:
    """The three JSON-lines files of a run, appended and flushed event by event."""

    def __init__(self, out_dir: Path, summary: RunSummary) -> None:
        self.out_dir, self.summary = out_dir, summary

    def __enter__(self) -> _Outputs:
        self.transcripts = open(self.out_dir / TRANSCRIPTS, "ab")
        self.findings = open(self.out_dir / FINDINGS, "ab")
        dead = open(self.out_dir / DEAD_LETTERS, "ab")
        self.letters = _DeadLetters(self.out_dir / DEAD_LETTERS, dead, self.summary)
        return self

    def __exit__(self, *exc: object) -> None:
        for f in (self.transcripts, self.findings, self.letters.out):
            f.close()

    @staticmethod
    def write(out: IO[bytes], event: Any) -> None:
        _write(out, event)


def repair_tail(path: Path) -> int:
    """Cut an incomplete last line (no newline: the process died while writing it).
    Returns the bytes dropped. Complete lines are whole events: each is one write, then fsync."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return 0
        data_end = path.read_bytes().rfind(b"\n") + 1
        f.truncate(data_end)
        f.flush()
        os.fsync(f.fileno())
        return size - data_end


def _write(out: IO[bytes], event: Any) -> None:
    _write_line(out, encode(event))


def _write_line(out: IO[bytes], value: bytes) -> None:
    out.write(value + b"\n")  # one line per event, synced: a crash leaves at most a partial tail
    out.flush()
    os.fsync(out.fileno())


def local_call_ids(paths: list[str]) -> dict[str, str]:
    """Local recordings' call ids: the name below the folder given, without its extension, as
    ``callqa ingest`` names their objects (the distributed pipeline gives the same ids)."""
    from pipeline.adapters.publisher import call_ids

    names = local_names(paths)
    ids = call_ids(names.values())
    return {key: ids[name] for key, name in names.items()}


def local_names(paths: list[str]) -> dict[str, str]:
    """Local recordings' names (object key -> path below the folder given, as ``callqa ingest`` names them)."""
    from pipeline.adapters.publisher import recording_names

    named = recording_names([Path(p) for p in paths if not p.startswith("s3://")])
    return {FileStore.ref_for(p).key: name for p, name in named}


def input_refs(paths: list[str], settings: Any) -> tuple[ObjectStore, list[ObjectRef]]:
    """Local files and folders, or one ``s3://bucket/prefix`` (listed through the configured endpoint)."""
    from pipeline.adapters.minio_store import retrying_store, storage_client
    from pipeline.adapters.publisher import find_recordings

    remote = [p for p in paths if p.startswith("s3://")]
    if remote:
        if len(remote) != len(paths):
            raise ValueError("mix of s3:// and local inputs: run them separately")
        client = storage_client(settings)
        refs = []
        for url in remote:
            bucket, _, prefix = url.removeprefix("s3://").partition("/")
            refs += [ObjectRef(bucket=bucket, key=o.object_name)
                     for o in client.list_objects(bucket, prefix=prefix, recursive=True) if not o.is_dir]
        return retrying_store(settings), refs
    return FileStore(), [FileStore.ref_for(p) for p in find_recordings([Path(p) for p in paths])]


def run_paths(settings: Any, paths: list[str], out_dir: Path, metadata: dict[str, str], engine: SpeechEngine,
              max_calls: int, max_audio_s: float, with_qa: bool, redact_audio: Mode | None = None) -> RunSummary:
    """The ``callqa run`` job, with a progress bar of audio hours, throughput and ETA."""
    store, refs = input_refs(paths, settings)
    copies = (out_dir / REDACTED_DIR).resolve()  # an --out inside an input folder: its copies are not calls
    refs = [r for r in refs if r.bucket != FileStore.BUCKET or not Path(r.key).is_relative_to(copies)]
    qa = QAEngine.from_paths(list(settings.qa_rule_packs)) if with_qa else None
    opts = RunOptions(out_dir=out_dir, buckets=Buckets(settings.bucket_edges_s, settings.bucket_names),
                      budget=BatchBudget(max_calls, max_audio_s), max_duration_s=settings.max_duration_s,
                      metadata=metadata, call_ids=local_call_ids(paths), names=local_names(paths),
                      redact_audio=redact_audio)
    bars: list[AudioProgress] = []

    def progress(calls: list[RoutedCall]) -> Progress:
        bars.append(AudioProgress(calls))
        return bars[-1].done

    try:
        with Interrupts().watching() as interrupts:
            return EmbeddedRunner(opts, store, engine, qa, interrupts).run(refs, progress)
    finally:
        for bar in bars:
            bar.close()
