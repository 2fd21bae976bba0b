"""The router's de-dup markers, held per arrivals partition (pure: no Kafka, no asyncio).

A marker (identity of a routed object version → when) is written to ``router.seen`` on
the partition *number* of the arrival it came from, in the arrival's transaction. Arrivals
of one object share a partition (they are keyed ``bucket/object``), so the router that owns
arrivals partition p needs only markers partition p: it loads that partition when p is
assigned and forgets it when p goes elsewhere.

Life of a partition here:

- ``assign``: every partition of the new assignment becomes *not ready*; each one gets a
  read plan (from offset 0 when new, from where the last read stopped when it was held
  before: markers are only ever added, so a catch-up read is enough). Partitions left out
  are dropped.
- ``sent``: the router produced a marker in the (still open) transaction of arrival offset o.
  It counts for de-dup at once (a second arrival of the object in the same transaction commits
  or aborts with the first) but is only *pending*: held apart from what was read or committed.
- ``committed``: the partition's transaction committed input offsets up to (not including) o:
  the pending markers of arrivals below o are committed and join the known ones.
- ``revoke``: not ready, and its pending markers are dropped: their transaction may abort, and
  an arrival it held is delivered again and must route. What was read or committed is kept, so
  a partition that comes straight back only catches up (a marker whose transaction did commit
  is in that read: read-committed reads wait for open transactions to end).
- ``loaded``: the markers read for one plan are merged in; the partition is ready only if
  no newer assignment superseded that plan (an epoch per assignment).

The router routes an event of partition p only while p is ready.

Memory: a marker is held as a 16-byte digest of its identity, not the identity itself (about
a third of the bytes; a collision, ~1e-27 for a million markers, would skip one object).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.errors import StackError


@dataclass(frozen=True)
class ReadPlan:
    partition: int
    start_offset: int
    epoch: int  # the assignment this read serves


def marker_digest(identity: str) -> bytes:
    return hashlib.blake2b(identity.encode(), digest_size=16).digest()


class MarkerSet:
    """The routed identities of one partition (what :meth:`ArrivalRouter.route` checks with ``in``):
    those read or committed, and those sent in a transaction not committed yet (pending)."""

    def __init__(self, digests: set[bytes] | None = None) -> None:
        self._digests = digests if digests is not None else set()
        self._pending: dict[bytes, int] = {}  # digest -> offset of the arrival whose transaction holds it

    def __contains__(self, identity: object) -> bool:
        if not isinstance(identity, str):
            return False
        digest = marker_digest(identity)
        return digest in self._digests or digest in self._pending

    def sent(self, identity: str, arrival_offset: int) -> None:
        """A marker produced in the open transaction of the arrival at ``arrival_offset``."""
        self._pending.setdefault(marker_digest(identity), arrival_offset)

    def committed(self, next_offset: int) -> int:
        """Input offsets below ``next_offset`` were committed: their markers are known. How many."""
        done = [d for d, offset in self._pending.items() if offset < next_offset]
        self._digests.update(done)
        for digest in done:
            del self._pending[digest]
        return len(done)

    def drop_pending(self) -> int:
        dropped = len(self._pending)
        self._pending.clear()
        return dropped

    @property
    def pending(self) -> int:
        return len(self._pending)

    def merge(self, read: MarkerRead) -> None:
        self._digests.difference_update(read.removed)
        if self._digests:
            self._digests.update(read.added)
        else:  # a first load takes the read's set as it is: no copy of a million digests
            self._digests = read.added

    def __len__(self) -> int:
        return len(self._digests)


@dataclass
class MarkerRead:
    """What a read of one marker partition found, in log order: the later record of an identity wins."""

    added: set[bytes] = field(default_factory=set)
    removed: set[bytes] = field(default_factory=set)  # tombstones
    records: int = 0

    def record(self, identity: str, routed_at: float | None) -> None:
        self.records += 1
        digest = marker_digest(identity)
        if routed_at is None:
            self.added.discard(digest)
            self.removed.add(digest)
        else:
            self.removed.discard(digest)
            self.added.add(digest)


@dataclass
class _Partition:
    seen: MarkerSet = field(default_factory=MarkerSet)
    next_offset: int = 0  # the first marker offset not read yet
    epoch: int = 0
    ready: bool = False


class MarkerTable:
    """The markers of the arrivals partitions this router owns, and which of them are complete."""

    def __init__(self) -> None:
        self._parts: dict[int, _Partition] = {}
        self._epoch = 0

    def assign(self, partitions: Iterable[int]) -> list[ReadPlan]:
        """A new assignment: drop what is no longer ours; plan a read for every partition we own."""
        wanted = set(partitions)
        self._epoch += 1
        for p in set(self._parts) - wanted:
            del self._parts[p]
        plans = []
        for p in sorted(wanted):
            part = self._parts.setdefault(p, _Partition())
            part.epoch, part.ready = self._epoch, False
            plans.append(ReadPlan(p, part.next_offset, self._epoch))
        return plans

    def revoke(self, partitions: Iterable[int]) -> int:
        """Not ready; markers of transactions not known to have committed are forgotten. How many."""
        dropped = 0
        for p in partitions:
            if p in self._parts:
                self._parts[p].ready = False
                dropped += self._parts[p].seen.drop_pending()
        return dropped

    def sent(self, partition: int, identity: str, arrival_offset: int) -> None:
        """The router produced ``identity``'s marker in the transaction of that arrival (not committed yet).
        Dropped when the partition was revoked meanwhile: that transaction may not commit."""
        part = self._parts.get(partition)
        if part is not None and part.ready:
            part.seen.sent(identity, arrival_offset)

    def committed(self, partition: int, next_offset: int) -> int:
        """The partition's input offsets below ``next_offset`` were committed with their outputs."""
        part = self._parts.get(partition)
        return 0 if part is None else part.seen.committed(next_offset)

    def loaded(self, plan: ReadPlan, read: MarkerRead, next_offset: int) -> bool:
        """Merge what a read found; True when the partition became ready by it."""
        part = self._parts.get(plan.partition)
        if part is None:  # revoked and given away while the read ran
            return False
        part.seen.merge(read)
        part.next_offset = max(part.next_offset, next_offset)
        if plan.epoch == part.epoch:
            part.ready = True
        return part.ready

    def is_ready(self, partition: int) -> bool:
        part = self._parts.get(partition)
        return part is not None and part.ready

    def seen(self, partition: int) -> MarkerSet:
        """The de-dup table of one owned partition (what :class:`ArrivalRouter` checks and the caller records in)."""
        part = self._parts.get(partition)
        if part is None or not part.ready:
            raise KeyError(f"markers of partition {partition} are not loaded")
        return part.seen

    @property
    def owned(self) -> list[int]:
        return sorted(self._parts)

    def __len__(self) -> int:
        return sum(len(p.seen) for p in self._parts.values())


def parse_marker(key: bytes | None, value: bytes | None) -> tuple[str, float | None] | None:
    """One record of ``router.seen``: (identity, routed-at) or (identity, None) for a tombstone.

    A record without a key, or with a value that is not a time, is not a marker: None (skipped),
    so one bad record cannot stop a router from starting.
    """
    if key is None:
        return None
    try:
        identity = key.decode()
        return identity, None if value is None else float(value)
    except (UnicodeDecodeError, ValueError):
        return None


def check_co_partitioned(partition_counts: dict[str, int], arrivals: str, markers: str) -> None:
    """A marker lives on its arrival's partition number: both topics need the same partition count."""
    if partition_counts[arrivals] != partition_counts[markers]:
        raise StackError(
            f"{markers} has {partition_counts[markers]} partitions and {arrivals} {partition_counts[arrivals]}: "
            "the router keeps each arrival's marker on the same partition number, so both need the same count "
            "(make them equal with `callqa topics apply` or kafka-topics --alter)"
        )
