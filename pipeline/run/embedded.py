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

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.file_store import FileStore
from pipeline.batching import BatchBudget, plan_batches
from pipeline.catalog import load_catalog
from pipeline.events import AudioArrived, DeadLetter, ObjectRef, RoutedCall, encode
from pipeline.logs import get_logger
from pipeline.qa import QAEngine, read_results_jsonl, write_report
from pipeline.run.embedded_files import (
    DEAD_LETTERS,
    FINDINGS,
    TRANSCRIPTS,
    Outputs,
    done_identities,
    lines,
    open_letters,
    repair_tail,
    transcribed_index,
    write_line,
)
from pipeline.run.embedded_inputs import input_refs, local_call_ids, local_names
from pipeline.run.embedded_summary import RunSummary, render_summary
from pipeline.run.interrupts import Interrupts
from pipeline.run.progress_bar import AudioProgress
from pipeline.run.redacted_audio import REDACTED_DIR, default_name, write_redacted
from pipeline.stages.asr import AsrBatch, AsrInput, AsrStage, SpeechEngine, Transcribed
from pipeline.stages.audio_redaction import Mode
from pipeline.stages.outputs import Received, Record, Writer, letters, plan_evaluated, plan_route, plan_transcribed
from pipeline.stages.qa import QaStage
from pipeline.stages.router import ArrivalRouter, Routed, Skipped
from pipeline.stages.routing import Buckets
from pipeline.stages.sizes import MessageLimits
from pipeline.stages.storage import ObjectStore

log = get_logger("callqa.embedded")


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
        done = done_identities(self.opts.out_dir / TRANSCRIPTS)
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
        with Outputs(self.opts.out_dir, summary) as out:
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
        with Outputs(self.opts.out_dir, summary) as out:
            self.process([AsrInput.of(f"event-{i}", p, None) for i, p in enumerate(payloads)], out)
        return summary

    def _batches(self, calls: list[RoutedCall]) -> Iterable[list[RoutedCall]]:
        """Calls of one duration bucket batch together, longest first, under the budget."""
        for bucket in self.opts.buckets.names:
            members = [c for c in calls if c.bucket == bucket]
            for batch in plan_batches(members, self.opts.budget):
                yield list(batch.items)

    def process(self, inputs: list[AsrInput[str]], out: Outputs) -> None:
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

    def _keep(self, done: Transcribed[str], record: Record, out: Outputs) -> None:
        # no clear-text PII at rest (redacted by the ASR stage); QA sees what the distributed QA stage sees
        transcript = done.redacted
        if self.qa is not None:  # findings first: a transcript line marks the call done
            outcome = self.qa.evaluate(transcript, record.value, record.key)
            for found in plan_evaluated(outcome, Received(record.value, record.key), self.writer):
                if found.letter is not None:
                    out.letters.add(found.letter)  # the transcript is still kept, as on asr.transcripts
                else:
                    write_line(out.findings, found.value)
        if self.opts.redact_audio is not None:  # before the transcript line: a rerun writes a missing copy
            self._redact(done, out.summary)
        write_line(out.transcripts, record.value)
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
        results = read_results_jsonl(line.decode() for line in lines(out / FINDINGS))
        if self.qa is not None:
            write_report(out / "report.html", results)
        index = transcribed_index(out)
        dead = open_letters(out, summary.failed_now, index.done, {r.call_id for r in results})
        for letter in dead:
            summary.reasons[letter.reason] = summary.reasons.get(letter.reason, 0) + 1
        text = render_summary(summary, results, dead, index.silent, index.foreign, index.untranscribed)
        (out / "summary.txt").write_text(text)


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
