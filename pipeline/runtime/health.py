"""Liveness and readiness of a stage process, as plain state (no HTTP, no Kafka).

The stage's loop calls :meth:`StageHealth.beat` every turn (the worker's poll loop, a Faust
timer); the consumer's assignment callbacks call :meth:`assigned` / :meth:`revoked`.
Live: the loop beat within ``liveness_limit_s``, and no batch has run past its deadline
(:mod:`pipeline.stages.deadline`: the worker's loop beats while the engine computes, so a wedged
accelerator shows only there; the worker calls :meth:`batch_started` / :meth:`batch_done`).
Ready: at least one partition assigned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.stages.deadline import BatchDeadline, batch_limit_s

if TYPE_CHECKING:
    from pipeline.config import Settings

Partition = tuple[str, int]


@dataclass(frozen=True)
class Probe:
    ok: bool
    detail: dict[str, Any]

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


@dataclass(frozen=True)
class _Batch:
    started: float
    limit_s: float


@dataclass
class StageHealth:
    stage: str
    liveness_limit_s: float = 120.0
    clock: Callable[[], float] = time.monotonic
    deadline: BatchDeadline = field(default_factory=BatchDeadline)
    _assigned: set[Partition] = field(default_factory=set)
    _last_beat: float | None = None
    _batch: _Batch | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, stage: str, settings: Settings) -> StageHealth:
        deadline = BatchDeadline(settings.liveness_batch_floor_s, settings.liveness_batch_factor,
                                 settings.liveness_batch_initial_rtfx)
        return cls(stage, settings.liveness_limit_s, deadline=deadline)

    def batch_started(self, audio_s: float, rtfx: float | None) -> None:
        """A batch of ``audio_s`` starts computing; ``rtfx`` is the worker's estimate (None: unmeasured)."""
        self._batch = _Batch(self.clock(), batch_limit_s(audio_s, rtfx, self.deadline))

    def batch_done(self) -> None:
        self._batch = None

    def batch_overdue(self) -> bool:
        batch = self._batch
        return batch is not None and self.clock() - batch.started > batch.limit_s

    def beat(self) -> None:
        self._last_beat = self.clock()

    def assigned(self, partitions: Iterable[Partition]) -> None:
        with self._lock:
            self._assigned.update(partitions)
        self.beat()

    def revoked(self, partitions: Iterable[Partition]) -> None:
        with self._lock:
            self._assigned.difference_update(partitions)

    def replace_assignment(self, partitions: Iterable[Partition]) -> None:
        """For runtimes that report the whole assignment (Faust) rather than increments."""
        with self._lock:
            self._assigned = set(partitions)
        self.beat()

    def partitions(self) -> list[Partition]:
        with self._lock:
            return sorted(self._assigned)

    def liveness(self) -> Probe:
        now, batch = self.clock(), self._batch
        age = None if self._last_beat is None else now - self._last_beat
        elapsed = None if batch is None else now - batch.started
        overdue = batch is not None and elapsed is not None and elapsed > batch.limit_s
        ok = age is not None and age <= self.liveness_limit_s and not overdue
        return Probe(ok, {"stage": self.stage, "last_beat_age_s": None if age is None else round(age, 3),
                          "limit_s": self.liveness_limit_s,
                          "batch_elapsed_s": None if elapsed is None else round(elapsed, 3),
                          "batch_limit_s": None if batch is None else round(batch.limit_s, 3),
                          "batch_overdue": overdue})

    def readiness(self) -> Probe:
        parts = self.partitions()
        return Probe(bool(parts), {"stage": self.stage, "assigned_partitions": len(parts),
                                   "partitions": [f"{t}[{p}]" for t, p in parts]})
