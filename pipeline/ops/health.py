"""Liveness and readiness of a stage process, as plain state (no HTTP, no Kafka).

The stage's loop calls :meth:`StageHealth.beat` every turn (the worker's poll loop, a Faust
timer); the consumer's assignment callbacks call :meth:`assigned` / :meth:`revoked`.
Live: the loop beat within ``liveness_limit_s``. Ready: at least one partition assigned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Partition = tuple[str, int]


@dataclass(frozen=True)
class Probe:
    ok: bool
    detail: dict[str, Any]

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


@dataclass
class StageHealth:
    stage: str
    liveness_limit_s: float = 120.0
    clock: Callable[[], float] = time.monotonic
    _assigned: set[Partition] = field(default_factory=set)
    _last_beat: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
        age = None if self._last_beat is None else self.clock() - self._last_beat
        ok = age is not None and age <= self.liveness_limit_s
        return Probe(ok, {"stage": self.stage, "last_beat_age_s": None if age is None else round(age, 3),
                          "limit_s": self.liveness_limit_s})

    def readiness(self) -> Probe:
        parts = self.partitions()
        return Probe(bool(parts), {"stage": self.stage, "assigned_partitions": len(parts),
                                   "partitions": [f"{t}[{p}]" for t, p in parts]})
