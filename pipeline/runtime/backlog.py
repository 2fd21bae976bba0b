"""How far a consumer group is behind, per partition, from offsets and two progress stamps (pure).

Inputs per partition: the group's committed offset, the partition's low and end (last stable)
offsets, the stamp of the first record at or after the committed offset, and the stamp of the
last record before the end offset. With stamps, messages and audio seconds behind are exact
differences (see :mod:`pipeline.headers`); without them (arrivals, transcripts, or an
unstamped record at either end) only messages are known, counted as offsets, which also
count transaction markers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.headers import Stamp


@dataclass(frozen=True)
class PartitionPosition:
    topic: str
    partition: int
    committed: int | None  # None: the group never committed here (it starts at the low offset)
    low: int
    end: int  # last stable offset (read_committed end)

    @property
    def start(self) -> int:
        """Where the group resumes: its committed offset, or the first retained record."""
        return self.low if self.committed is None or self.committed < self.low else self.committed

    @property
    def offsets_behind(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class PartitionBacklog:
    stage: str
    group: str
    topic: str
    partition: int
    committed: int | None
    end: int
    messages: int
    audio_s: float | None  # None: not known for this topic
    consumed_audio_s: float | None  # cumulative audio the group has consumed here (for throughput)
    exact: bool  # messages from stamps (True) or from offsets (False)
    # When (epoch s) an open transaction began holding back the last stable offset; None: none open.
    held_since: float | None = None


def partition_backlog(stage: str, group: str, pos: PartitionPosition, at_start: Stamp | None,
                      before_end: Stamp | None, stamped: bool = True,
                      held_since: float | None = None) -> PartitionBacklog:
    """``stamped``: the topic carries progress stamps (audio is known); else messages only."""
    common = dict(stage=stage, group=group, topic=pos.topic, partition=pos.partition,
                  committed=pos.committed, end=pos.end, held_since=held_since)
    if pos.offsets_behind == 0:
        consumed = before_end.cum_audio_s if before_end else (0.0 if pos.end == 0 else None)
        return PartitionBacklog(**common, messages=0, audio_s=0.0 if stamped else None,
                                consumed_audio_s=consumed if stamped else None, exact=True)
    if at_start is not None and before_end is not None and before_end.cum_calls >= at_start.cum_calls:
        return PartitionBacklog(**common, messages=before_end.cum_calls - at_start.before_calls,
                                audio_s=round(before_end.cum_audio_s - at_start.before_audio_s, 3),
                                consumed_audio_s=at_start.before_audio_s, exact=True)
    return PartitionBacklog(**common, messages=pos.offsets_behind, audio_s=None,
                            consumed_audio_s=at_start.before_audio_s if at_start else None, exact=False)
