"""Where a bounded replay's group stands against its stop offsets, read from Kafka while the
replaying stage runs (its worker or QA process stops when the group has reached them)."""

from __future__ import annotations

from pipeline.config import Settings
from pipeline.stages.replay_bound import GroupAt, Progress, StopOffsets, gaps, progress


class BoundWatch:
    """Reads a bounded replay group's committed offsets (without joining it) and, where one is short
    of its stop offset, whether anything but transaction markers lies between."""

    def __init__(self, settings: Settings, group: str, bound: StopOffsets) -> None:
        from pipeline.runtime.lag_kafka import OffsetsReader  # confluent_kafka, once a replay is bounded

        self.group, self.bound = group, bound
        self.reader = OffsetsReader(settings)

    def check(self) -> Progress:
        tps = [(self.bound.topic, p) for p in sorted(self.bound.offsets)]
        committed = self.reader.committed(self.group, tps)
        marks = self.reader.watermarks(tps)
        at = [GroupAt(p, committed.get((t, p)), marks[(t, p)][0]) for t, p in tps]
        short = {(self.bound.topic, p): gap for p, gap in gaps(self.bound, at).items()}
        drained = {p for _, p in self.reader.markers_only(short)} if short else set()
        return progress(self.bound, at, drained)

    def close(self) -> None:
        self.reader.close()
