"""The ASR stage as a plain object: routed calls in, ``Transcribed | Dead`` out, per call.

prepare: decode the RoutedCall event → fetch the object → decode the audio (through an
injected :class:`AudioFetcher`); transcribe: one engine batch, and when the batch raises,
each call again alone so only the call at fault is dead-lettered (``asr_failed``).
Each transcript is redacted and encoded here, on the thread that computes it, so the
committing thread only sends bytes (a 9 MiB transcript takes seconds to redact).
Nothing raises out of it. Used by the Kafka worker and the embedded runner alike; the
engine is injected (a :class:`SpeechEngine`), so this module loads no torch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol

from pipeline.asr.audio import CallAudio
from pipeline.asr.transcript import BatchStats, CallTranscript
from pipeline.errors import DecodeError
from pipeline.events import (
    DeadLetter,
    ReasonCode,
    RoutedCall,
    SourcePosition,
    Transcript,
    UnsupportedSchemaVersion,
    decode,
    encode,
)
from pipeline.stages.outcomes import Dead, Tag
from pipeline.stages.redaction import redact_transcript
from pipeline.stages.transcript_event import to_transcript


class SpeechEngine(Protocol):
    """What the stage needs of :class:`pipeline.asr.Engine`."""

    @property
    def last_batch_stats(self) -> Sequence[BatchStats]: ...

    def transcribe_batch(self, calls: Sequence[CallAudio], /) -> list[CallTranscript]: ...

    def transcribe(self, call: CallAudio, /) -> CallTranscript: ...


@dataclass(frozen=True)
class AsrInput(Generic[Tag]):
    """One input message, its RoutedCall decoded once (``call`` is None when it did not decode)."""

    tag: Tag
    payload: bytes
    key: bytes | None
    source: SourcePosition | None
    call: RoutedCall | None
    error: str | None = None
    error_reason: ReasonCode = "malformed_event"  # unsupported_schema: a major version this code does not read

    @classmethod
    def of(
        cls,
        tag: Tag,
        payload: bytes,
        key: bytes | None,
        source: SourcePosition | None = None,
    ) -> AsrInput[Tag]:
        try:
            return cls(tag, payload, key, source, decode(payload, RoutedCall))
        except UnsupportedSchemaVersion as exc:  # the reason the router gives the same event
            return cls(tag, payload, key, source, None, str(exc), "unsupported_schema")
        except DecodeError as exc:
            return cls(tag, payload, key, source, None, str(exc))

    @property
    def duration_s(self) -> float:
        return self.call.duration_s if self.call else 0.0

    def undecodable(self) -> Dead[Tag]:
        """The letter of an input whose event did not decode (the one place its reason is chosen)."""
        return self.dead(self.error_reason, self.error or "undecodable")

    def dead(self, reason: ReasonCode, message: str, attempts: int = 1) -> Dead[Tag]:
        return Dead(
            DeadLetter.of(
                payload=self.payload,
                key=self.key,
                reason=reason,
                message=message,
                stage="asr",
                source=self.source,
                attempts=attempts,
            ),
            self.tag,
        )


@dataclass(frozen=True)
class Fetched(Generic[Tag]):
    """A call whose audio is decoded and ready for the engine."""

    input: AsrInput[Tag]
    call: RoutedCall
    audio: CallAudio
    fetch_s: float


class AudioFetcher(Protocol):
    """Fetch + decode the audio of calls (:class:`pipeline.adapters.fetch.Fetcher`); order is kept."""

    def fetch(self, inputs: Sequence[AsrInput[Tag]]) -> list[Fetched[Tag] | Dead[Tag]]: ...


@dataclass(frozen=True)
class Transcribed(Generic[Tag]):
    tag: Tag
    call: RoutedCall
    transcript: Transcript  # as the engine heard it: clear-text PII, never published by default
    redacted: Transcript  # PII masked: what asr.transcripts and the embedded files get
    value: bytes  # ``redacted`` encoded once, ready to send


def transcribed(tag: Tag, call: RoutedCall, transcript: Transcript, source: AsrInput[Tag]) -> AsrOutcome[Tag]:
    """The outcome with its redacted, encoded form; a call whose redaction fails is dead-lettered,
    never published in clear (fail closed)."""
    try:
        redacted = redact_transcript(transcript)
        return Transcribed(tag, call, transcript, redacted, encode(redacted))
    except Exception as exc:  # noqa: BLE001 - one transcript's redaction bug costs that call only
        return source.dead("internal_error", f"redaction failed: {type(exc).__name__}: {exc}")


AsrOutcome = Transcribed[Tag] | Dead[Tag]


@dataclass
class Prepared(Generic[Tag]):
    """A batch after fetch: the calls ready for the engine and those already dead."""

    inputs: list[AsrInput[Tag]]
    ready: list[Fetched[Tag]]
    dead: list[Dead[Tag]]


@dataclass
class AsrBatch(Generic[Tag]):
    """The outcome of every input of a batch (transcribed first, then dead) and what the engine reported."""

    outcomes: list[AsrOutcome[Tag]]
    stats: list[BatchStats] = field(default_factory=list)  # of every engine call that succeeded
    wall_s: float = 0.0
    batch_error: str | None = None  # set when the batch raised and each call ran alone

    @property
    def transcribed(self) -> list[Transcribed[Tag]]:
        return [o for o in self.outcomes if isinstance(o, Transcribed)]

    @property
    def dead(self) -> list[Dead[Tag]]:
        return [o for o in self.outcomes if isinstance(o, Dead)]


class AsrStage:
    def __init__(self, fetcher: AudioFetcher, engine: SpeechEngine, replay_id: str | None = None) -> None:
        self.fetcher, self.engine = fetcher, engine
        self.replay_id = replay_id  # a replay run's id on every transcript (else the routed call's own)

    def prepare(self, inputs: Sequence[AsrInput[Tag]]) -> Prepared[Tag]:
        """Undecodable events are ``malformed_event``; the rest are fetched and decoded."""
        dead: list[Dead[Tag]] = [i.undecodable() for i in inputs if i.call is None]
        results = self.fetcher.fetch([i for i in inputs if i.call is not None])
        return Prepared(
            list(inputs),
            [r for r in results if isinstance(r, Fetched)],
            dead + [r for r in results if isinstance(r, Dead)],
        )

    def transcribe(self, batch: Prepared[Tag]) -> AsrBatch[Tag]:
        """The batch through the engine; if the batch raises, each call again alone to find the one at fault."""
        if not batch.ready:
            return AsrBatch(list(batch.dead))
        started = time.perf_counter()
        try:
            results = self.engine.transcribe_batch([r.audio for r in batch.ready])
        except Exception as exc:  # noqa: BLE001 - find the call at fault, keep the others
            return self._one_by_one(batch, exc)
        wall_s = time.perf_counter() - started
        done: list[AsrOutcome[Tag]] = [
            transcribed(
                r.input.tag,
                r.call,
                to_transcript(r.call, res, {"fetch_s": r.fetch_s, "batch_wall_s": wall_s}, self.replay_id),
                r.input,
            )
            for r, res in zip(batch.ready, results, strict=True)
        ]
        return AsrBatch([*done, *batch.dead], list(self.engine.last_batch_stats), wall_s)

    def _one_by_one(self, batch: Prepared[Tag], batch_error: Exception) -> AsrBatch[Tag]:
        done: list[AsrOutcome[Tag]] = []
        stats: list[BatchStats] = []
        started = time.perf_counter()
        for r in batch.ready:
            try:
                result = self.engine.transcribe(r.audio)
            except Exception as exc:  # noqa: BLE001 - one bad call must not stop the others
                done.append(r.input.dead("asr_failed", repr(exc)))
                continue
            stats += self.engine.last_batch_stats
            transcript = to_transcript(r.call, result, {"fetch_s": r.fetch_s}, self.replay_id)
            done.append(transcribed(r.input.tag, r.call, transcript, r.input))
        return AsrBatch([*done, *batch.dead], stats, time.perf_counter() - started, repr(batch_error))
