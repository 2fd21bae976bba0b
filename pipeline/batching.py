"""Pure batch planning by duration: no torch, no Kafka, no clock.

Anything with a ``duration_s`` can be planned: ASR windows inside the engine,
or whole calls in a Kafka worker's micro-batch. Items are grouped by length
bucket (each bucket pads to one computed length), sorted longest first, and
packed into batches that respect a :class:`BatchBudget` — a frozen constraint
object that decides when a batch is full, in the spirit of lhotse's sampler
constraints. Padding efficiency (audio frames ÷ computed frames) is
accounted per batch and overall.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pipeline.errors import CallQAError


class BatchPlanError(CallQAError):
    """An item cannot be planned (e.g. longer than the largest bucket)."""


class HasDuration(Protocol):
    @property
    def duration_s(self) -> float: ...


T = TypeVar("T", bound=HasDuration)


@dataclass(frozen=True)
class BatchBudget:
    """Caps of one batch: item count and total (computed) audio seconds.

    A single item costlier than ``max_audio_s`` still forms a batch of one, so
    planning never stalls.
    """

    max_items: int
    max_audio_s: float

    def __post_init__(self) -> None:
        if self.max_items < 1 or self.max_audio_s <= 0:
            raise BatchPlanError(f"invalid budget {self}: need max_items >= 1 and max_audio_s > 0")

    def is_full(self, n_items: int, audio_s: float) -> bool:
        """True when nothing more can join a batch holding n_items worth audio_s."""
        return n_items >= self.max_items or audio_s >= self.max_audio_s

    def admits(self, n_items: int, audio_s: float, next_cost_s: float) -> bool:
        """Whether an item costing next_cost_s may join (an empty batch admits anything)."""
        if n_items == 0:
            return True
        return n_items + 1 <= self.max_items and audio_s + next_cost_s <= self.max_audio_s + 1e-9

    def items_for(self, cost_s: float) -> int:
        """Largest batch of items each costing cost_s (the memory-pool shape of a bucket)."""
        return max(1, min(self.max_items, int(math.floor(self.max_audio_s / cost_s + 1e-9))))


@dataclass(frozen=True)
class Batch(Generic[T]):
    """Items planned together; ``padded_s`` is the length each item is computed at (None: own length)."""

    items: tuple[T, ...]
    padded_s: float | None

    @property
    def audio_s(self) -> float:
        return sum(item.duration_s for item in self.items)

    @property
    def computed_s(self) -> float:
        if self.padded_s is None:
            return self.audio_s
        return self.padded_s * len(self.items)

    @property
    def padding_efficiency(self) -> float:
        """Audio seconds ÷ computed seconds (1.0 means no padding)."""
        return self.audio_s / self.computed_s if self.computed_s > 0 else 1.0


def bucket_for(duration_s: float, buckets_s: Sequence[float]) -> float:
    """Smallest bucket edge >= duration_s (buckets sorted ascending)."""
    i = bisect.bisect_left(buckets_s, duration_s - 1e-9)
    if i == len(buckets_s):
        raise BatchPlanError(f"item of {duration_s:.2f} s exceeds the largest bucket {buckets_s[-1]} s")
    return buckets_s[i]


def plan_batches(items: Iterable[T], budget: BatchBudget, buckets_s: Sequence[float] | None = None) -> list[Batch[T]]:
    """Group items by bucket and pack each bucket longest-first under ``budget``.

    With ``buckets_s`` every item costs its bucket length (the padded shape it
    is computed at); without, it costs its own duration. Deterministic: equal
    inputs give equal plans.
    """
    edges = sorted(buckets_s) if buckets_s else None
    groups: dict[float | None, list[T]] = {}
    for item in items:
        if item.duration_s < 0:
            raise BatchPlanError(f"negative duration {item.duration_s}")
        key = bucket_for(item.duration_s, edges) if edges else None
        groups.setdefault(key, []).append(item)
    batches: list[Batch[T]] = []
    for key in sorted(groups, key=lambda k: -1.0 if k is None else k, reverse=True):
        members = sorted(groups[key], key=lambda it: it.duration_s, reverse=True)
        batches += [Batch(tuple(run), key) for run in pack_in_order(members, budget, _padded_cost(key))]
    return batches


def _padded_cost(padded_s: float | None) -> Callable[[HasDuration], float]:
    """An item's cost in a batch: the bucket length it is padded to, or its own length."""
    if padded_s is None:
        return lambda item: item.duration_s
    return lambda item: padded_s


@dataclass(frozen=True)
class MixedBatch(Generic[T]):
    """Items decoded together although encoded at different lengths: ``buckets_s[i]`` is the
    length item i is computed at; items run longest first, so equal buckets are adjacent."""

    items: tuple[T, ...]
    buckets_s: tuple[float, ...]

    @property
    def padded_s(self) -> float:
        """The longest computed length (what the shared decoder state is sized for)."""
        return self.buckets_s[0]

    @property
    def audio_s(self) -> float:
        return sum(item.duration_s for item in self.items)

    @property
    def computed_s(self) -> float:
        return sum(self.buckets_s)

    def groups(self) -> list[tuple[float, range]]:
        """(bucket, positions) of each run of equal buckets, in order."""
        out: list[tuple[float, range]] = []
        start = 0
        for i in range(1, len(self.items) + 1):
            if i == len(self.items) or self.buckets_s[i] != self.buckets_s[start]:
                out.append((self.buckets_s[start], range(start, i)))
                start = i
        return out


def plan_mixed(
    items: Iterable[T], budget: BatchBudget, buckets_s: Sequence[float], capacity: Callable[[float], int]
) -> list[MixedBatch[T]]:
    """Sort longest first and cut into batches whose items keep their own buckets.

    For a model whose expensive, length-dependent part (an encoder) runs per bucket and
    whose cheap-per-row, step-bound part (a decoder) runs once per batch: fine buckets
    waste little padding without shrinking the decoder's batches. A batch holds at most
    ``capacity(b)`` items, b being its first (longest) item's bucket, so every item fits a
    buffer shaped for that many items of length b; the budget's caps apply as in
    :func:`plan_batches`, each item costing its own bucket.
    """
    edges = sorted(buckets_s)
    ordered = sorted(items, key=lambda it: it.duration_s, reverse=True)
    batches: list[MixedBatch[T]] = []
    current: list[T] = []
    buckets: list[float] = []
    for item in ordered:
        if item.duration_s < 0:
            raise BatchPlanError(f"negative duration {item.duration_s}")
        bucket = bucket_for(item.duration_s, edges)
        full = current and (
            len(current) >= capacity(buckets[0]) or not budget.admits(len(current), sum(buckets), bucket)
        )
        if full:
            batches.append(MixedBatch(tuple(current), tuple(buckets)))
            current, buckets = [], []
        current.append(item)
        buckets.append(bucket)
    if current:
        batches.append(MixedBatch(tuple(current), tuple(buckets)))
    return batches


def pack_in_order(
    items: Iterable[T], budget: BatchBudget, cost: Callable[[T], float] = lambda it: it.duration_s
) -> Iterator[list[T]]:
    """Cut ``items``, in the order given, into consecutive runs the budget admits.

    The one packing rule shared by the planner, the worker's micro-batches and the
    embedded runner: an item joins the current run while the budget admits it.
    """
    current: list[T] = []
    cost_total = 0.0
    for item in items:
        item_cost = cost(item)
        if not budget.admits(len(current), cost_total, item_cost):
            yield current
            current, cost_total = [], 0.0
        current.append(item)
        cost_total += item_cost
    if current:
        yield current


@dataclass
class PaddingTally:
    """Running padding-efficiency account over many batches."""

    audio_s: float = 0.0
    computed_s: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)

    def add(self, batch: Batch[HasDuration]) -> None:
        self.audio_s += batch.audio_s
        self.computed_s += batch.computed_s
        self.batch_sizes.append(len(batch.items))

    @property
    def efficiency(self) -> float:
        return self.audio_s / self.computed_s if self.computed_s > 0 else 1.0
