"""Replay decisions (pure): which offsets move where, and how replayed output is told apart.

Three ways to re-run part of a night:

- reset: move a *stopped* group's committed offsets back (or forward) to a time or an offset,
  per partition. A dry run shows the moves; only ``--execute`` commits them.
- new group: a fresh consumer group (``callqa worker --group G --replay-id R``, ``callqa qa --group G
  --replay-id R``) starts at the chosen time and writes output tagged ``replay_id = R``; the
  original group's offsets are not touched.
- reroute: arrivals in a time range are sent to ``audio.arrivals`` again with the header
  ``callqa-replay-generation: N``; the router's de-dup identity of such an arrival includes the
  generation, so it is routed once more per generation (and only once), tagged ``replay_id = genN``.
"""

from __future__ import annotations

from dataclasses import dataclass

TP = tuple[str, int]


@dataclass(frozen=True)
class OffsetMove:
    topic: str
    partition: int
    current: int | None  # None: the group has no committed offset here
    target: int

    @property
    def delta(self) -> int | None:
        return None if self.current is None else self.target - self.current

    @property
    def changes(self) -> bool:
        return self.current != self.target


def plan_moves(current: dict[TP, int | None], targets: dict[TP, int], bounds: dict[TP, tuple[int, int]]) -> list[OffsetMove]:
    """One move per selected partition, each target clamped to what the partition still holds."""
    moves = []
    for tp in sorted(targets):
        low, end = bounds[tp]
        moves.append(OffsetMove(tp[0], tp[1], current.get(tp), min(max(targets[tp], low), end)))
    return moves


def describe_move(move: OffsetMove) -> str:
    current = "none" if move.current is None else str(move.current)
    delta = "" if move.delta is None else f" ({move.delta:+d})"
    return f"{move.topic}[{move.partition}]: {current} -> {move.target}{delta}"




def replay_tag(generation: int) -> str:
    """The replay id a rerouted arrival's routed call and transcript carry."""
    return f"gen{generation}"
