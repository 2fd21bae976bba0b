"""When a batch has hung: its expected compute time from audio seconds and the measured RTFx.

A worker's poll loop keeps turning while the engine computes (group membership must hold), so a
loop heartbeat cannot tell a long batch from a wedged accelerator. A batch is *overdue* once it has
run ``factor`` times longer than its audio at the worker's RTFx predicts, and never before
``floor_s`` (model warm-up, a tiny batch's fixed costs). Liveness fails then, so the orchestrator
restarts the process and the group hands its partitions to a healthy worker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BatchDeadline:
    floor_s: float = 600.0
    factor: float = 10.0
    initial_rtfx: float = 1.0  # until a batch was measured: assume real time (pessimistic)

    def __post_init__(self) -> None:
        if self.floor_s <= 0 or self.factor < 1 or self.initial_rtfx <= 0:
            raise ValueError(f"batch deadline needs floor_s > 0, factor >= 1, initial_rtfx > 0: {self}")


def batch_limit_s(audio_s: float, rtfx: float | None, policy: BatchDeadline) -> float:
    """Seconds a batch of ``audio_s`` may compute before it counts as hung."""
    expected_s = audio_s / (rtfx or policy.initial_rtfx)
    return max(policy.floor_s, policy.factor * expected_s)


def batch_overdue(audio_s: float, rtfx: float | None, elapsed_s: float, policy: BatchDeadline) -> bool:
    return elapsed_s > batch_limit_s(audio_s, rtfx, policy)


@dataclass
class RtfxEstimate:
    """The slowest RTFx of the last ``window`` batches: one slow batch (a long call, a cold cache)
    widens the limit of the next ones rather than narrowing it."""

    window: int = 8
    _recent: deque[float] = field(default_factory=deque)

    def observe(self, audio_s: float, wall_s: float) -> None:
        if audio_s <= 0 or wall_s <= 0:
            return
        self._recent.append(audio_s / wall_s)
        while len(self._recent) > self.window:
            self._recent.popleft()

    @property
    def value(self) -> float | None:
        return min(self._recent) if self._recent else None
