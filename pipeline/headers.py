"""Record headers callqa writes for operations, and their encoding (pure).

Bottom layer, beside :mod:`pipeline.events` (a record's value) as its headers: the stages'
output planner stamps them, the runners read them, the operator's commands (:mod:`pipeline.ops`)
read and write them for lag, redrive and replay.

Progress stamps on every routed call (``audio.bucket.*``), written by the router:

- ``callqa-cum-audio-s``: audio seconds routed to this partition up to and including this record;
- ``callqa-cum-calls``: calls routed to this partition up to and including this record;
- ``callqa-audio-s``: this call's own duration;
- ``callqa-stamp-lane``: the totals' lane, the arrivals partition the call was routed from.

The totals run per lane, not per partition: several routers write one bucket partition, each
from its own arrivals partitions, and one writer per lane keeps each lane's totals a true
running sum (per-partition totals kept by each router interleaved, and the audio between two
offsets read about 1/N of the truth with N routers). The audio (and calls) between two offsets
is then a sum over lanes of differences of two stamps: each lane's first stamp at or after the
one offset and its last stamp before the other, found a few records from each end where lanes
interleave. See :mod:`pipeline.runtime.backlog`.

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
LANE = "callqa-stamp-lane"
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


Lane = int | None  # an arrivals partition; None: a stamp from before lanes (one writer per partition)


@dataclass(frozen=True)
class Stamp:
    """The progress stamp of one routed record: its lane's totals up to and including it."""

    cum_audio_s: float
    cum_calls: int
    audio_s: float
    lane: Lane = None

    @property
    def before_audio_s(self) -> float:
        """Audio routed to the partition before this record."""
        return self.cum_audio_s - self.audio_s

    @property
    def before_calls(self) -> int:
        return self.cum_calls - 1

    def to_headers(self) -> list[tuple[str, bytes]]:
        lane = [] if self.lane is None else [(LANE, str(self.lane).encode())]
        return [(CUM_AUDIO, f"{self.cum_audio_s:.3f}".encode()), (CUM_CALLS, str(self.cum_calls).encode()),
                (AUDIO, f"{self.audio_s:.3f}".encode()), *lane]

    @classmethod
    def from_headers(cls, headers: HeadersLike) -> Stamp | None:
        values = [header(headers, n) for n in (CUM_AUDIO, CUM_CALLS, AUDIO)]
        if any(v is None for v in values):
            return None  # not stamped (e.g. written by hand or by a redrive)
        lane = header(headers, LANE)
        try:
            return cls(float(values[0]), int(values[1]), float(values[2]), None if lane is None else int(lane))
        except ValueError:
            return None


@dataclass
class PartitionProgress:
    """The router's running totals per output partition (topic, partition) and lane.

    A lane's totals are recovered from its last stamp in each output partition when the router
    is assigned the lane's arrivals partition, and forgotten when it loses it (the next owner
    advances them), so totals survive restarts and hand-overs and never go backwards.
    """

    totals: dict[tuple[str, int, Lane], Stamp] = field(default_factory=dict)

    def stamp(self, topic: str, partition: int, audio_s: float, lane: Lane = None) -> Stamp:
        last = self.totals.get((topic, partition, lane), Stamp(0.0, 0, 0.0, lane))
        new = Stamp(round(last.cum_audio_s + audio_s, 3), last.cum_calls + 1, round(audio_s, 3), lane)
        self.totals[(topic, partition, lane)] = new
        return new

    def recover(self, topic: str, partition: int, last: Stamp) -> None:
        current = self.totals.get((topic, partition, last.lane))
        if current is None or last.cum_calls > current.cum_calls:
            self.totals[(topic, partition, last.lane)] = last

    def forget(self, lanes: Iterable[Lane]) -> None:
        gone = set(lanes)
        self.totals = {key: stamp for key, stamp in self.totals.items() if key[2] not in gone}
