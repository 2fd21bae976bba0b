"""A bounded replay (pure): the stop offsets captured at its start, which records it drops, and
when its consumer group as a whole is done.

``callqa replay group`` reads the end (last stable) offset of every partition of the input when
it sets the group's start, and prints them in the command to run as ``--stop-at
TOPIC:P=OFFSET,...``. A replay worker or QA stage does not process a record at or past the stop
offset of its partition, and ends when the *group's* committed offset of every partition has
reached its stop offset: not its own partitions only, so no member leaves while a partition that
a rebalance moved is still being worked on. A committed offset short of the stop counts as
reached when the offsets between hold only transaction markers (a transaction's commit marker
takes the offset after its last record), the same test ``callqa lag`` makes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.errors import ConfigError

_FLAG = re.compile(r"(?P<topic>[A-Za-z0-9._-]+):(?P<parts>\d+=\d+(?:,\d+=\d+)*)")


@dataclass(frozen=True)
class StopOffsets:
    topic: str
    offsets: Mapping[int, int]  # partition -> stop offset (exclusive)

    @classmethod
    def parse(cls, text: str) -> StopOffsets:
        """``TOPIC:P=OFFSET,P=OFFSET,...`` (what ``replay group`` prints)."""
        match = _FLAG.fullmatch(text.strip())
        if match is None:
            raise ConfigError(f"--stop-at {text!r}: expected TOPIC:PARTITION=OFFSET,... (as `replay group` prints it)")
        pairs = [item.partition("=") for item in match["parts"].split(",")]
        offsets = {int(p): int(o) for p, _, o in pairs}
        if len(offsets) != len(pairs):
            raise ConfigError(f"--stop-at {text!r}: a partition is given twice")
        return cls(match["topic"], offsets)

    def flag(self) -> str:
        return f"{self.topic}:" + ",".join(f"{p}={o}" for p, o in sorted(self.offsets.items()))

    def stop_of(self, partition: int) -> int:
        # A partition not listed was added after the replay started: it holds only newer records.
        return self.offsets.get(partition, 0)

    def keeps(self, topic: str, partition: int, offset: int) -> bool:
        """Whether the replay processes this record: of its input, only what was there when it
        started. A record of another topic the stage reads (a retry topic: redrives addressed to
        this group) is not the bound's to drop."""
        return topic != self.topic or offset < self.stop_of(partition)

    def check_topic(self, topic: str) -> None:
        if topic != self.topic:
            raise ConfigError(f"--stop-at names {self.topic}, but this stage reads {topic}")


@dataclass(frozen=True)
class GroupAt:
    """Where the replay group stands on one partition."""

    partition: int
    committed: int | None  # None: never committed (the group starts at the low offset)
    low: int  # the first offset the partition still holds

    @property
    def start(self) -> int:
        return self.low if self.committed is None or self.committed < self.low else self.committed


def gaps(bound: StopOffsets, at: list[GroupAt]) -> dict[int, tuple[int, int]]:
    """Partitions whose group position is short of its stop offset: ``[start, stop)`` per partition,
    to be read for data records (a gap holding only transaction markers counts as reached)."""
    return {a.partition: (a.start, bound.stop_of(a.partition)) for a in at if a.start < bound.stop_of(a.partition)}


@dataclass(frozen=True)
class Progress:
    left: dict[int, tuple[int, int]]  # partitions with data left before the stop: (position, stop)

    @property
    def done(self) -> bool:
        return not self.left


def progress(bound: StopOffsets, at: list[GroupAt], markers_only: set[int]) -> Progress:
    """``markers_only``: the partitions among :func:`gaps` whose gap holds no data record."""
    return Progress({p: gap for p, gap in gaps(bound, at).items() if p not in markers_only})


@dataclass
class ReplayTally:
    """What this member processed (records before their stop offset, evaluated or dead-lettered)."""

    by_partition: Counter[int] = field(default_factory=Counter)
    last: Progress | None = None  # the latest check of the group

    def count(self, partition: int, n: int = 1) -> None:
        self.by_partition[partition] += n

    @property
    def finished(self) -> bool:
        return self.last is not None and self.last.done

    @property
    def processed(self) -> int:
        return sum(self.by_partition.values())


def summary(group: str, bound: StopOffsets, tally: ReplayTally) -> str:
    """The one line a finished replay prints."""
    parts = ", ".join(f"{p}:{n}" for p, n in sorted(tally.by_partition.items()))
    return (
        f"replay done: group {group} at its stop offsets {bound.flag()}; "
        f"{tally.processed} record(s) processed here" + (f" ({parts})" if parts else "")
    )


def unfinished(group: str, bound: StopOffsets, tally: ReplayTally) -> str:
    """The line a replay stopped before its stop offsets prints (it exits 1; run it again to go on)."""
    left = tally.last.left if tally.last is not None else {}
    where = ", ".join(f"{p}: {pos} of {stop}" for p, (pos, stop) in sorted(left.items())) or "(not checked yet)"
    return (
        f"replay stopped before its stop offsets: group {group} on {bound.topic} at {where}; "
        f"{tally.processed} record(s) processed here; run the same command again to go on"
    )
