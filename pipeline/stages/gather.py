"""Gathering a worker's micro-batch: consumed messages in, one batch within the window out.

Pure (no Kafka): messages come in through a :class:`MessageLike` protocol from an
injected ``consume(max_messages, timeout_s)`` and time from an injected clock, so
the window, the budget and revocations are unit-tested with fakes. Each message is
decoded once when it arrives (:class:`pipeline.stages.asr.AsrInput`) and stamped with
its partition's generation (:class:`pipeline.stages.checkpoint.Checkpoint`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pipeline.batching import BatchBudget, pack_in_order
from pipeline.events import SourcePosition
from pipeline.stages.asr import AsrInput
from pipeline.stages.checkpoint import Checkpoint, PartitionKey, Position
from pipeline.stages.window_estimate import WINDOW_S, estimated_windows


class MessageLike(Protocol):
    """The part of a confluent-kafka ``Message`` the worker reads."""

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...


M = TypeVar("M", bound=MessageLike)
Consume = Callable[[int, float], list[M]]  # (max messages, timeout in seconds) -> messages without errors
Clock = Callable[[], float]  # monotonic seconds


def position_of(msg: MessageLike) -> tuple[str, int, int]:
    return str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)


@dataclass(frozen=True)
class Queued(Generic[M]):
    """A consumed message: its position (with generation) and the decoded input."""

    position: Position
    input: AsrInput[M]

    @property
    def duration_s(self) -> float:
        return self.input.duration_s

    @property
    def estimated_window_s(self) -> float:
        """The model windows its audio is estimated to fill, in window seconds (none: undecodable)."""
        call = self.input.call
        return 0.0 if call is None else estimated_windows(call.duration_s, call.channels) * WINDOW_S


class Gatherer(Generic[M]):
    """Collects messages for at most ``window_ms`` or until ``budget`` is full; leftovers wait.

    What waits is kept per partition, and a batch takes the partitions in turns (one message of
    each, the turn starting after the partition the last batch ended on), so a worker drains all
    its partitions at one pace: a partition moved to a member added mid-night still holds its
    share of the work. The worker pauses a partition with a batch's worth waiting (``waiting``).

    With ``max_windows``, a batch also holds at most that many estimated model windows
    (:mod:`pipeline.stages.window_estimate`): a whole number of the engine's model batches, so
    that no micro-batch ends in a model batch of a few windows.
    """

    def __init__(
        self,
        consume: Consume[M],
        checkpoint: Checkpoint,
        budget: BatchBudget,
        window_ms: int,
        clock: Clock = time.monotonic,
        max_windows: int | None = None,
    ) -> None:
        self.consume, self.checkpoint, self.budget = consume, checkpoint, budget
        # one more cap on what the budget took: estimated window seconds (at least one call)
        self.window_budget = None if max_windows is None else BatchBudget(budget.max_items, max_windows * WINDOW_S)
        self.window_s = window_ms / 1000
        self.clock = clock
        self.queues: dict[PartitionKey, deque[Queued[M]]] = {}
        self._after: PartitionKey | None = None  # the next batch starts at the partition after this one

    @property
    def pending(self) -> list[Queued[M]]:
        """Every waiting message, in the order the next batches would take them."""
        return list(self._in_turns())

    def waiting(self) -> dict[PartitionKey, int]:
        return {key: len(q) for key, q in self.queues.items() if q}

    def add(self, msg: M) -> None:
        topic, partition, offset = position_of(msg)
        source = SourcePosition(topic=topic, partition=partition, offset=offset)
        queued = Queued(
            self.checkpoint.stamp(topic, partition, offset), AsrInput.of(msg, msg.value() or b"", msg.key(), source)
        )
        self.queues.setdefault(queued.position.key, deque()).append(queued)

    def gather(self) -> list[Queued[M]]:
        """Up to the budget, within one window; what does not fit waits for the next batch."""
        deadline = self.clock() + self.window_s
        while sum(self.waiting().values()) < self.budget.max_items and self.clock() < deadline:
            for msg in self.consume(self.budget.max_items, max(0.0, deadline - self.clock())):
                self.add(msg)
        taken = next(pack_in_order(self._in_turns(), self.budget), [])
        if self.window_budget is not None:
            taken = next(pack_in_order(taken, self.window_budget, cost=lambda q: q.estimated_window_s), [])
        for q in taken:
            self.queues[q.position.key].popleft()  # taken in turns: each partition's first ones
        if taken:
            self._after = taken[-1].position.key
        self.queues = {key: q for key, q in self.queues.items() if q}
        return taken

    def _in_turns(self) -> Iterator[Queued[M]]:
        keys = sorted(key for key, q in self.queues.items() if q)
        if not keys:
            return
        after = self._after
        order = keys if after is None else [k for k in keys if k > after] + [k for k in keys if k <= after]
        for depth in range(max(len(self.queues[k]) for k in order)):
            for key in order:
                if depth < len(self.queues[key]):
                    yield self.queues[key][depth]

    def drop(self, partitions: Iterable[PartitionKey]) -> None:
        """Revoked partitions: their waiting messages belong to another member now."""
        for key in partitions:
            self.queues.pop(key, None)

    def clear(self) -> None:
        """After a rewind every waiting message will be delivered again."""
        self.queues.clear()
