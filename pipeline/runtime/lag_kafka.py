"""Read a consumer group's backlog from Kafka: offsets from the admin API, stamps from two small reads.

Per call: one ListOffsets round (low and last-stable offsets of every partition), one
committed-offsets request per group, then two fetch rounds over all stamped partitions at
once: the first record at each committed offset, and the last record before each end offset.
Nothing scans a topic (see :mod:`pipeline.headers`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from pipeline.config import Settings
from pipeline.errors import StackError
from pipeline.headers import Stamp
from pipeline.runtime.backlog import PartitionBacklog, PartitionPosition, partition_backlog
from pipeline.runtime.kafka_retry import TIMEOUT_S, retrying

TP = tuple[str, int]


@dataclass(frozen=True)
class StageSpec:
    stage: str  # router | asr-<bucket> | qa
    group: str
    topic: str
    stamped: bool  # records carry progress stamps (the bucket topics)


def stage_specs(settings: Settings, router_group: str, qa_group: str,
                buckets: Sequence[str] | None = None, asr_groups: dict[str, str] | None = None) -> list[StageSpec]:
    """The consumer groups of a deployment, in pipeline order."""
    specs = [StageSpec("router", router_group, settings.arrivals, False)]
    for bucket in buckets or settings.bucket_names:
        group = (asr_groups or {}).get(bucket) or settings.topic(f"asr-{bucket}")
        specs.append(StageSpec(f"asr-{bucket}", group, settings.topic(f"audio.bucket.{bucket}"), True))
    specs.append(StageSpec("qa", qa_group, settings.topic("asr.transcripts"), False))
    return specs


def group_specs(reader: "OffsetsReader", specs: list[StageSpec], asked: Sequence[str]) -> list[StageSpec]:
    """Specs for groups named on the command line: ``STAGE=GROUP`` (a stage of ``specs``, e.g.
    ``asr-short=asr-short-r2``), or a bare ``GROUP``: every stage whose input it has offsets on."""
    out = []
    for value in asked:
        stage, _, group = value.rpartition("=")
        if stage:
            base = next((s for s in specs if s.stage == stage), None)
            if base is None:
                raise StackError(f"--group {value}: no stage {stage!r} (stages: {[s.stage for s in specs]})")
            out.append(StageSpec(stage, group, base.topic, base.stamped))
            continue
        found = [StageSpec(s.stage, group, s.topic, s.stamped) for s in specs
                 if any(o is not None for o in reader.committed(group, [(s.topic, p) for p in reader.partitions(s.topic)]).values())]
        if not found:
            raise StackError(f"group {group} has no committed offsets on any stage's input; "
                             "name its stage: --group STAGE=GROUP")
        out.extend(found)
    return [s for s in out if s not in specs]


class OffsetsReader:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.admin = AdminClient(settings.kafka_common())  # its own client: runtime sits below the adapters
        self._group_consumers: dict[str, Consumer] = {}
        self._uncommitted: Consumer | None = None
        self.consumer = Consumer({
            **settings.kafka_common(), "group.id": f"callqa-ops-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
            "fetch.wait.max.ms": 10, "max.partition.fetch.bytes": 65536, "fetch.max.bytes": 1048576,
        })

    def close(self) -> None:
        self.consumer.close()
        if self._uncommitted is not None:
            self._uncommitted.close()
        for consumer in self._group_consumers.values():
            consumer.close()

    # -- offsets ----------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[int]:
        meta = self.admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None:
            raise StackError(f"topic {topic} not found (run: callqa topics apply)")
        return sorted(meta.partitions)

    def watermarks(self, tps: list[TP]) -> dict[TP, tuple[int, int]]:
        """(low, last stable offset) of each partition, two ListOffsets requests in all."""
        if not tps:
            return {}
        def offsets(spec: OffsetSpec) -> dict[TP, int]:
            futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                              isolation_level=IsolationLevel.READ_COMMITTED,
                                              request_timeout=TIMEOUT_S)
            return {(tp.topic, tp.partition): f.result(timeout=TIMEOUT_S).offset for tp, f in futures.items()}

        low = retrying(lambda: offsets(OffsetSpec.earliest()), "low offsets")
        end = retrying(lambda: offsets(OffsetSpec.latest()), "end offsets")
        return {tp: (low[tp], end[tp]) for tp in tps}

    def open_transactions(self, stable: dict[TP, int], timeout_s: float = 10.0) -> dict[TP, float]:
        """When (epoch s) the open transaction holding back each partition's last stable offset
        wrote its first record there: the record at that offset, read uncommitted. Partitions
        whose high watermark is the last stable offset have none and are left out."""
        if not stable:
            return {}
        futures = self.admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in stable},
                                          isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=TIMEOUT_S)
        held = {(tp.topic, tp.partition) for tp, f in futures.items()
                if f.result(timeout=TIMEOUT_S).offset > stable[(tp.topic, tp.partition)]}
        if not held:
            return {}
        if self._uncommitted is None:
            self._uncommitted = Consumer({**self.settings.kafka_common(), "group.id": f"callqa-ops-{uuid.uuid4().hex[:8]}",
                                          "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        self._uncommitted.assign([TopicPartition(t, p, stable[(t, p)]) for t, p in held])
        found: dict[TP, float] = {}
        deadline = time.monotonic() + timeout_s
        try:
            while len(found) < len(held) and time.monotonic() < deadline:
                for msg in self._uncommitted.consume(100, timeout=0.2):
                    tp = (msg.topic(), msg.partition())
                    if not msg.error() and tp in held and tp not in found:
                        found[tp] = msg.timestamp()[1] / 1000
        finally:
            self._uncommitted.unassign()
        return found

    def committed(self, group: str, tps: list[TP]) -> dict[TP, int | None]:
        # A consumer carrying the group's id reads its offsets without joining it. (The admin
        # call list_consumer_group_offsets crashed the process, confluent-kafka 2.16.1, when
        # the group coordinator was not yet available on a fresh cluster.)
        if group not in self._group_consumers:
            self._group_consumers[group] = Consumer({**self.settings.kafka_common(), "group.id": group,
                                                     "enable.auto.commit": False})
        # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while a fresh cluster elects the group's
        # coordinator (seen on the first `replay group` of a new stack): retried
        consumer, asked = self._group_consumers[group], [TopicPartition(t, p) for t, p in tps]
        parts = retrying(lambda: consumer.committed(asked, timeout=TIMEOUT_S), f"committed offsets of group {group}")
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in parts}

    # -- stamps -----------------------------------------------------------------------------

    def _read(self, starts: dict[TP, int], stops: dict[TP, int], first: bool, any_record: bool = False,
              timeout_s: float = 15.0) -> tuple[dict[TP, Stamp], set[TP]]:
        """Stamps read from ``starts`` up to ``stops`` (exclusive): the first found, or the last;
        and the partitions holding no data record in that range (only transaction markers)."""
        todo = {tp for tp, start in starts.items() if start < stops[tp]}
        found: dict[TP, Stamp] = {}
        has_data: set[TP] = set()
        if not todo:
            return found, set(starts)
        self.consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in todo])
        deadline = time.monotonic() + timeout_s
        try:
            while todo and time.monotonic() < deadline:
                for msg in self.consumer.consume(1000, timeout=0.2):
                    tp = (msg.topic(), msg.partition())
                    if tp not in todo:
                        continue
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            todo.discard(tp)
                        continue
                    if msg.offset() >= stops[tp]:
                        todo.discard(tp)
                        continue
                    has_data.add(tp)
                    if any_record:
                        todo.discard(tp)
                        continue
                    stamp = Stamp.from_headers(msg.headers())
                    if stamp is not None:
                        found[tp] = stamp
                        if first:
                            todo.discard(tp)
        finally:
            self.consumer.unassign()
        return found, set(starts) - has_data - todo

    def markers_only(self, gaps: dict[TP, tuple[int, int]]) -> set[TP]:
        """The partitions whose ``[start, stop)`` holds no data record, only transaction markers
        (one not read to its end in time is not among them)."""
        return self._read({tp: start for tp, (start, _) in gaps.items()},
                          {tp: stop for tp, (_, stop) in gaps.items()}, first=True, any_record=True)[1]

    def last_stamps(self, ends: dict[TP, tuple[int, int]], back: int = 8) -> dict[TP, Stamp]:
        """The stamp of the last record before each end offset (a few offsets back: transaction
        markers take offsets too), looking further back once where the last few were unstamped."""
        found, _ = self._read({tp: max(low, end - back) for tp, (low, end) in ends.items()},
                              {tp: end for tp, (_, end) in ends.items()}, first=False)
        missing = {tp: v for tp, v in ends.items() if tp not in found and v[1] - v[0] > back}
        if missing:
            found.update(self._read({tp: max(low, end - 64 * back) for tp, (low, end) in missing.items()},
                                    {tp: end - back for tp, (_, end) in missing.items()}, first=False)[0])
        return found

    # -- the backlog ------------------------------------------------------------------------

    def backlog(self, specs: list[StageSpec]) -> list[PartitionBacklog]:
        tps_of = {s: [(s.topic, p) for p in self.partitions(s.topic)] for s in specs}
        marks = self.watermarks(sorted({tp for tps in tps_of.values() for tp in tps}))
        positions: dict[StageSpec, list[PartitionPosition]] = {}
        for spec, tps in tps_of.items():
            committed = self.committed(spec.group, tps)
            positions[spec] = [PartitionPosition(t, p, committed.get((t, p)), *marks[(t, p)]) for t, p in tps]
        stamped = [pos for spec, ps in positions.items() if spec.stamped for pos in ps]
        plain = [pos for spec, ps in positions.items() if not spec.stamped for pos in ps]
        # Is anything but transaction markers left after the committed offset? One record tells.
        _, plain_drained = self._read({(p.topic, p.partition): p.start for p in plain},
                                      {(p.topic, p.partition): p.end for p in plain}, first=True, any_record=True)
        at_start, drained = self._read({(p.topic, p.partition): p.start for p in stamped},
                              {(p.topic, p.partition): p.end for p in stamped}, first=True)
        before_end = self.last_stamps({(p.topic, p.partition): (p.low, p.end) for p in stamped})
        opened = self.open_transactions({tp: end for tp, (_, end) in marks.items()})
        rows = []
        for spec, ps in positions.items():
            for pos in ps:
                tp = (pos.topic, pos.partition)
                if tp in (drained if spec.stamped else plain_drained):  # only transaction markers after the committed offset
                    pos = PartitionPosition(pos.topic, pos.partition, pos.end, pos.low, pos.end)
                rows.append(partition_backlog(spec.stage, spec.group, pos, at_start.get(tp) if spec.stamped else None,
                                              before_end.get(tp) if spec.stamped else None, spec.stamped,
                                              held_since=opened.get(tp)))
        return rows


def recover_progress(settings: Settings, topics: list[str], progress: "PartitionProgress | None" = None) -> "PartitionProgress":
    """The router's per-partition totals, from the last stamped record of each output partition."""
    from pipeline.headers import PartitionProgress

    progress = progress or PartitionProgress()
    reader = OffsetsReader(settings)
    try:
        tps = [(t, p) for t in topics for p in reader.partitions(t)]
        for (topic, partition), stamp in reader.last_stamps(reader.watermarks(tps)).items():
            progress.recover(topic, partition, stamp)
    finally:
        reader.close()
    return progress
