"""What a consumer may still commit: partition generations and a floor that never goes back.

Pure (no Kafka). The worker stamps every consumed message with its partition's
generation, bumps the generation on every revocation, and asks for a
:class:`CommitPlan` before it produces a batch's outputs:

- a message whose partition was revoked at any point after it was consumed is stale,
  even if the partition came back since: another member may have processed it and
  committed past it, so producing its output again would duplicate it and committing
  its offset would move the group's position backwards;
- a message below what this consumer already committed is done: neither its output
  nor its offset is sent again, so a committed offset never decreases.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

PartitionKey = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class Position:
    """One consumed message and the generation of its partition when it was consumed."""

    topic: str
    partition: int
    offset: int
    generation: int

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class CommitPlan:
    keep: frozenset[tuple[str, int, int]]  # (topic, partition, offset) whose outputs may be produced
    offsets: dict[PartitionKey, int]  # next offset to commit, per partition
    stale: int  # dropped: the partition was revoked since the fetch
    behind: int  # dropped: at or below an offset already committed


@dataclass
class Checkpoint:
    _generation: dict[PartitionKey, int] = field(default_factory=dict)
    _assigned: set[PartitionKey] = field(default_factory=set)
    _committed: dict[PartitionKey, int] = field(default_factory=dict)  # next offset, as committed

    def assign(self, partitions: Iterable[PartitionKey]) -> None:
        self._assigned.update(partitions)

    def revoke(self, partitions: Iterable[PartitionKey]) -> None:
        """Revoked or lost: everything consumed from these partitions until now is stale."""
        for key in partitions:
            self._generation[key] = self._generation.get(key, 0) + 1
            self._assigned.discard(key)

    def stamp(self, topic: str, partition: int, offset: int) -> Position:
        return Position(topic, partition, offset, self._generation.get((topic, partition), 0))

    def is_current(self, pos: Position) -> bool:
        return pos.key in self._assigned and pos.generation == self._generation.get(pos.key, 0)

    def plan(self, positions: Iterable[Position]) -> CommitPlan:
        keep: set[tuple[str, int, int]] = set()
        offsets: dict[PartitionKey, int] = {}
        stale = behind = 0
        for pos in positions:
            if not self.is_current(pos):
                stale += 1
            elif pos.offset < self._committed.get(pos.key, 0):
                behind += 1
            else:
                keep.add((pos.topic, pos.partition, pos.offset))
                offsets[pos.key] = max(offsets.get(pos.key, 0), pos.offset + 1)
        return CommitPlan(frozenset(keep), offsets, stale, behind)

    def committed(self, plan: CommitPlan) -> None:
        """Record a plan whose transaction committed."""
        for key, offset in plan.offsets.items():
            self._committed[key] = max(self._committed.get(key, 0), offset)
