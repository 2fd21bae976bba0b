"""Record headers callqa writes for operations, and their encoding (pure).

Bottom layer, beside :mod:`pipeline.events` (a record's value) as its headers: the stages'
output planner stamps them, the runners read them, the operator's commands (:mod:`pipeline.ops`)
read and write them for lag, redrive and replay.

Progress stamps on every routed call (``audio.bucket.*``), written by the router:

- ``callqa-cum-audio-s``: audio seconds routed to this partition up to and including this record;
- ``callqa-cum-calls``: calls routed to this partition up to and including this record;
- ``callqa-audio-s``: this call's own duration.

So the audio (and calls) between any two offsets is a difference of two stamps, and the
backlog of a consumer group costs two single-record reads per partition (at the committed
offset and just before the end offset), never a scan. See :mod:`pipeline.runtime.backlog`.

Redrive and replay markers: ``callqa-redrive-attempt`` (the how-many-th redrive of a dead
letter's payload), ``callqa-replay-generation`` (an arrival re-routed past the de-dup markers)
and ``callqa-retry-group`` (on a ``<stage>.retry`` record: the one consumer group that takes it).
A dead letter keeps the input's :data:`PROCESSING` headers and a redrive sends them back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CUM_AUDIO = "callqa-cum-audio-s"
CUM_CALLS = "callqa-cum-calls"
AUDIO = "callqa-audio-s"
REDRIVE_ATTEMPT = "callqa-redrive-attempt"
REPLAY_GENERATION = "callqa-replay-generation"
RETRY_GROUP = "callqa-retry-group"
# Headers that change how a stage processes an input (so a dead letter keeps them for its redrive).
# Not the progress stamps: a redriven record is not part of a bucket partition's totals.
PROCESSING = (REPLAY_GENERATION,)
MAX_HEADER_CHARS = 256  # a kept header value longer than this is not one callqa wrote

HeadersLike = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None


def header(headers: HeadersLike, name: str) -> str | None:
    """The last value of ``name`` (Kafka allows repeats), decoded; clients hand headers as lists or dicts."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found = None
    for key, value in items:
        if key == name and value is not None:
            found = value.decode() if isinstance(value, bytes) else str(value)
    return found


def int_header(headers: HeadersLike, name: str, default: int = 0) -> int:
    value = header(headers, name)
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def processing_headers(headers: HeadersLike) -> dict[str, str]:
    """The input's headers a dead letter keeps (see :data:`PROCESSING`)."""
    kept = {name: header(headers, name) for name in PROCESSING}
    return {k: v[:MAX_HEADER_CHARS] for k, v in kept.items() if v is not None}


def addressed_elsewhere(headers: HeadersLike, group: str) -> bool:
    """Whether a record is a redrive for another consumer group (an ASR redrive goes back into its
    bucket topic, which every ASR group of the bucket reads: only the group that failed it takes it)."""
    target = header(headers, RETRY_GROUP)
    return target is not None and target != group


def addressed_to(headers: HeadersLike, group: str) -> bool:
    """Whether a ``<stage>.retry`` record is for this consumer group (each group of a stage reads the
    retry topic; only the group that failed the input processes it, the others pass it by)."""
    return header(headers, RETRY_GROUP) == group


@dataclass(frozen=True)
class Stamp:
    """The progress stamp of one routed record."""

    cum_audio_s: float
    cum_calls: int
    audio_s: float

    @property
    def before_audio_s(self) -> float:
        """Audio routed to the partition before this record."""
        return self.cum_audio_s - self.audio_s

    @property
    def before_calls(self) -> int:
        return self.cum_calls - 1

    def to_headers(self) -> list[tuple[str, bytes]]:
        return [(CUM_AUDIO, f"{self.cum_audio_s:.3f}".encode()), (CUM_CALLS, str(self.cum_calls).encode()),
                (AUDIO, f"{self.audio_s:.3f}".encode())]

    @classmethod
    def from_headers(cls, headers: HeadersLike) -> Stamp | None:
        values = [header(headers, n) for n in (CUM_AUDIO, CUM_CALLS, AUDIO)]
        if any(v is None for v in values):
            return None  # not stamped (e.g. written by hand or by a redrive)
        try:
            return cls(float(values[0]), int(values[1]), float(values[2]))
        except ValueError:
            return None


@dataclass
class PartitionProgress:
    """The router's running totals per output partition (topic, partition).

    Recovered from the last record of each output partition when the router starts or is
    assigned arrivals, so totals survive restarts and never go backwards.
    """

    totals: dict[tuple[str, int], Stamp] = field(default_factory=dict)

    def stamp(self, topic: str, partition: int, audio_s: float) -> Stamp:
        last = self.totals.get((topic, partition), Stamp(0.0, 0, 0.0))
        new = Stamp(round(last.cum_audio_s + audio_s, 3), last.cum_calls + 1, round(audio_s, 3))
        self.totals[(topic, partition)] = new
        return new

    def recover(self, topic: str, partition: int, last: Stamp) -> None:
        current = self.totals.get((topic, partition))
        if current is None or last.cum_calls > current.cum_calls:
            self.totals[(topic, partition)] = last
