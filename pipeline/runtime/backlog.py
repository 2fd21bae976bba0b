"""How far a consumer group is behind, per partition, from offsets and progress stamps (pure).

Inputs per partition: the group's committed offset, the partition's low and end (last stable)
offsets, and per lane (see :mod:`pipeline.headers`) the lane's first stamp at or after the
committed offset and its last stamp before the end offset. With stamps, messages and audio
seconds behind are exact sums of per-lane differences; without them (arrivals, transcripts, or
no stamped record after the committed offset) only messages are known, counted as offsets,
which also count transaction markers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.headers import Lane, Stamp


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
    consumed_audio_s: float | None  # audio the group has consumed here, all lanes (None: not known)
    exact: bool  # messages and audio from stamps of every lane (True), or messages from offsets (False)
    # When (epoch s) an open transaction began holding back the last stable offset; None: none open.
    held_since: float | None = None
    # Audio each lane had routed here before the committed offset, for the group's throughput: the
    # lanes found near the ends (a lane found in one sample and not the next is idle here).
    consumed_by_lane: Mapping[Lane, float] = field(default_factory=dict)


def partition_backlog(
    stage: str,
    group: str,
    pos: PartitionPosition,
    ahead: Mapping[Lane, Stamp],
    last: Mapping[Lane, Stamp],
    stamped: bool = True,
    held_since: float | None = None,
    complete: bool = True,
    every_lane: bool = True,
) -> PartitionBacklog:
    """``stamped``: the topic carries progress stamps (audio is known); else messages only.
    ``ahead``: each lane's first stamp at or after the committed offset; ``last``: each lane's last
    stamp before the end offset. ``complete``: every lane with records after the committed offset
    is in both (else the audio is what the lanes found hold, a lower bound, and inexact);
    ``every_lane``: every lane that wrote here is in ``last`` (so the consumed total is known)."""
    common = dict(
        stage=stage,
        group=group,
        topic=pos.topic,
        partition=pos.partition,
        committed=pos.committed,
        end=pos.end,
        held_since=held_since,
    )
    if not stamped:
        return PartitionBacklog(
            **common, messages=pos.offsets_behind, audio_s=None, consumed_audio_s=None, exact=pos.offsets_behind == 0
        )
    ahead = {lane: stamp for lane, stamp in ahead.items() if lane in last} if pos.offsets_behind else {}
    # A lane with nothing after the committed offset has consumed all it routed here.
    consumed = {lane: stamp.cum_audio_s for lane, stamp in last.items() if complete and lane not in ahead}
    consumed |= {lane: stamp.before_audio_s for lane, stamp in ahead.items()}
    total = round(sum(consumed.values()), 3) if complete and every_lane else None
    if pos.offsets_behind == 0:
        return PartitionBacklog(
            **common, messages=0, audio_s=0.0, consumed_audio_s=total, exact=True, consumed_by_lane=consumed
        )
    if not ahead:  # only unstamped records (redrives) after the committed offset
        return PartitionBacklog(
            **common,
            messages=pos.offsets_behind,
            audio_s=None,
            consumed_audio_s=total,
            exact=False,
            consumed_by_lane=consumed,
        )
    messages = sum(last[lane].cum_calls - stamp.before_calls for lane, stamp in ahead.items())
    audio_s = sum(last[lane].cum_audio_s - stamp.before_audio_s for lane, stamp in ahead.items())
    return PartitionBacklog(
        **common,
        messages=messages if complete else pos.offsets_behind,
        audio_s=round(audio_s, 3),
        consumed_audio_s=total,
        exact=complete,
        consumed_by_lane=consumed,
    )
