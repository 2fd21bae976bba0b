"""The files of an embedded run in ``--out``: appended line by line, each line one event and
fsynced, so a crash leaves at most a partial last line (cut by :func:`repair_tail` on the next
run); what is done and which dead letters are still open are read back from them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any, NamedTuple

from pipeline.events import DeadLetter, Transcript, decode, encode
from pipeline.run.embedded_summary import RunSummary

TRANSCRIPTS, FINDINGS, DEAD_LETTERS = "transcripts.jsonl", "findings.jsonl", "dead_letters.jsonl"


class TranscribedIndex(NamedTuple):
    done: set[str | None]  # object keys and call ids transcribed
    silent: list[str]  # calls in which no speech was found
    foreign: list[tuple[str, str, float]]  # calls in a language outside the set: (call id, language, probability)
    untranscribed: list[
        tuple[str, float, list[str]]
    ]  # calls with speech heard and not written: (call id, seconds, why)


def transcribed_index(out: Path) -> TranscribedIndex:
    """What ``out``'s transcripts say about the calls done (:class:`TranscribedIndex`)."""
    index = TranscribedIndex(set(), [], [], [])
    for line in lines(out / TRANSCRIPTS):
        t = decode(line, Transcript)
        index.done.update((t.object.key, t.call_id))  # routing letters carry the object key, ASR letters the call id
        if not t.segments:
            index.silent.append(t.call_id)
        if t.unsupported_language is not None:
            index.foreign.append((t.call_id, t.unsupported_language.language, t.unsupported_language.probability))
        if t.untranscribed:
            seconds = sum(u.end_s - u.start_s for u in t.untranscribed)
            index.untranscribed.append((t.call_id, seconds, sorted({u.why for u in t.untranscribed})))
    return index


def open_letters(
    out: Path,
    failed_now: set[tuple[str | None, str]],
    done: set[str | None] | None = None,
    evaluated: set[str] | None = None,
) -> list[DeadLetter]:
    """The dead letters of inputs still not processed: for a file that failed in this run, the
    letters of this run only; for the others, those of earlier runs unless the file has been
    processed since (replaced by a good copy, say: transcribed, and for a QA failure evaluated),
    so it no longer fails the exit status."""
    done = transcribed_index(out).done if done is None else done
    evaluated = evaluated or set()
    failing = {key for key, _ in failed_now}
    letters = [decode(line, DeadLetter) for line in lines(out / DEAD_LETTERS)]
    return [
        d
        for d in letters
        if (d.original_key, d.reason) in failed_now
        or (d.original_key not in (evaluated if d.stage == "qa" else done) and d.original_key not in failing)
    ]


def done_identities(path: Path) -> dict[str, float]:
    """Dedup keys (as the routing stage computes them) of calls already transcribed."""
    done = {}
    for line in lines(path):
        done[decode(line, Transcript).object.identity] = 0.0
    return done


def lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().splitlines() if line.strip()]


class DeadLetters:
    """dead_letters.jsonl: a rerun lists each (file, reason) once, however often it failed."""

    def __init__(self, path: Path, out: IO[bytes], summary: RunSummary) -> None:
        self.out, self.summary = out, summary
        self.listed = {(d.original_key, d.reason) for d in (decode(line, DeadLetter) for line in lines(path))}

    def add(self, letter: DeadLetter) -> None:
        self.summary.failed_now.add((letter.original_key, letter.reason))
        if (letter.original_key, letter.reason) not in self.listed:
            self.listed.add((letter.original_key, letter.reason))
            write_event(self.out, letter)
            self.summary.dead += 1


class Outputs:
    """The three JSON-lines files of a run, appended and flushed event by event."""

    def __init__(self, out_dir: Path, summary: RunSummary) -> None:
        self.out_dir, self.summary = out_dir, summary

    def __enter__(self) -> Outputs:
        self.transcripts = open(self.out_dir / TRANSCRIPTS, "ab")
        self.findings = open(self.out_dir / FINDINGS, "ab")
        dead = open(self.out_dir / DEAD_LETTERS, "ab")
        self.letters = DeadLetters(self.out_dir / DEAD_LETTERS, dead, self.summary)
        return self

    def __exit__(self, *exc: object) -> None:
        for f in (self.transcripts, self.findings, self.letters.out):
            f.close()


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


def write_event(out: IO[bytes], event: Any) -> None:
    write_line(out, encode(event))


def write_line(out: IO[bytes], value: bytes) -> None:
    out.write(value + b"\n")  # one line per event, synced: a crash leaves at most a partial tail
    out.flush()
    os.fsync(out.fileno())
