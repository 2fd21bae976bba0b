"""Read a consumer group's backlog from Kafka: offsets from the admin API, stamps from two small reads.

Per call: one ListOffsets round (low and last-stable offsets of every partition), one
committed-offsets request per group, then two fetch rounds over all stamped partitions at
once: back from each end offset until every lane's last stamp is found (a few records per lane
where lanes interleave), and forward from each committed offset until the first stamp of every
lane with records after it is. Nothing scans a topic (see :mod:`pipeline.headers`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from pipeline.config import Settings
from pipeline.errors import StackError
from pipeline.headers import Lane, Stamp
from pipeline.runtime.backlog import PartitionBacklog, PartitionPosition, partition_backlog
from pipeline.runtime.kafka_retry import TIMEOUT_S, retrying

TP = tuple[str, int]
# Offsets `callqa lag` reads back from a bucket partition's end for its lanes' last stamps: past
# it (lanes that stopped writing long ago, under a backlog larger than this) its audio is a lower
# bound, marked inexact. Where lanes interleave, a few records per lane find them all.
BACK_CAP = 20_000


@dataclass
class LanesBack:
    """What reading back from a partition's end found: each lane's last stamp and its offset."""

    read_from: int  # the lowest offset read
    found: dict[Lane, tuple[int, Stamp]] = field(default_factory=dict)
    every_lane: bool = False  # every lane asked for was found, or the whole partition read
    data_after_start: bool = False  # a data record at or after the group's start offset

    def stamps(self) -> dict[Lane, Stamp]:
        return {lane: stamp for lane, (_, stamp) in self.found.items()}

    def lanes_from(self, start: int) -> set[Lane]:
        """The lanes found with records at or after ``start``."""
        return {lane for lane, (offset, _) in self.found.items() if offset >= start}

    def drained(self, start: int) -> bool:
        """Nothing but transaction markers from ``start`` to the end."""
        return self.read_from <= start and not self.data_after_start


@dataclass(frozen=True)
class StageSpec:
    stage: str  # router | asr-<bucket> | qa
    group: str
    topic: str
    stamped: bool  # records carry progress stamps (the bucket topics)


def stage_specs(
    settings: Settings,
    router_group: str,
    qa_group: str,
    buckets: Sequence[str] | None = None,
    asr_groups: dict[str, str] | None = None,
) -> list[StageSpec]:
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
        found = [
            StageSpec(s.stage, group, s.topic, s.stamped)
            for s in specs
            if any(
                o is not None
                for o in reader.committed(group, [(s.topic, p) for p in reader.partitions(s.topic)]).values()
            )
        ]
        if not found:
            raise StackError(
                f"group {group} has no committed offsets on any stage's input; name its stage: --group STAGE=GROUP"
            )
        out.extend(found)
    return [s for s in out if s not in specs]


class OffsetsReader:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.admin = AdminClient(settings.kafka_common())  # its own client: runtime sits below the adapters
        self._group_consumers: dict[str, Consumer] = {}
        self._uncommitted: Consumer | None = None
        self.consumer = Consumer(
            {
                **settings.kafka_common(),
                "group.id": f"callqa-ops-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "max.partition.fetch.bytes": 65536,
                "fetch.max.bytes": 1048576,
            }
        )

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
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in tps},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=TIMEOUT_S,
            )
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
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in stable},
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            request_timeout=TIMEOUT_S,
        )
        held = {
            (tp.topic, tp.partition)
            for tp, f in futures.items()
            if f.result(timeout=TIMEOUT_S).offset > stable[(tp.topic, tp.partition)]
        }
        if not held:
            return {}
        if self._uncommitted is None:
            self._uncommitted = Consumer(
                {
                    **self.settings.kafka_common(),
                    "group.id": f"callqa-ops-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",
                }
            )
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
            self._group_consumers[group] = Consumer(
                {**self.settings.kafka_common(), "group.id": group, "enable.auto.commit": False}
            )
        # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while a fresh cluster elects the group's
        # coordinator (seen on the first `replay group` of a new stack): retried
        consumer, asked = self._group_consumers[group], [TopicPartition(t, p) for t, p in tps]
        parts = retrying(lambda: consumer.committed(asked, timeout=TIMEOUT_S), f"committed offsets of group {group}")
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in parts}

    def members(self, groups: Collection[str], timeout_s: float = 5.0) -> dict[str, int | None]:
        """How many consumers each group has now (None: not known: the describe failed or timed
        out, as it did for ``replay``'s check on one stack; the rate then ignores membership)."""
        if not groups:
            return {}
        try:
            futures = self.admin.describe_consumer_groups(sorted(groups), request_timeout=timeout_s)
        except KafkaException:
            return dict.fromkeys(groups)
        out: dict[str, int | None] = {}
        for group, future in futures.items():
            try:
                out[group] = len(future.result(timeout=timeout_s).members)
            except (KafkaException, TimeoutError):
                out[group] = None
        return out

    # -- stamps ---------------------------------------------------------------------------

    def _each(
        self, ranges: dict[TP, tuple[int, int]], visit: Callable[[TP, int, Any], bool], timeout_s: float = 15.0
    ) -> set[TP]:
        """Reads each partition's ``[start, stop)`` in order, calling ``visit(tp, offset, headers)`` on
        each data record until it returns True; returns the partitions read to the end of their
        range or stopped by ``visit`` (the rest ran out of time)."""
        todo = {tp for tp, (start, stop) in ranges.items() if start < stop}
        finished = set(ranges) - todo
        if not todo:
            return finished
        self.consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in todo])
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
                            finished.add(tp)
                        continue
                    if msg.offset() >= ranges[tp][1] or visit(tp, msg.offset(), msg.headers()):
                        todo.discard(tp)
                        finished.add(tp)
        finally:
            self.consumer.unassign()
        return finished

    def markers_only(self, gaps: dict[TP, tuple[int, int]]) -> set[TP]:
        """The partitions whose ``[start, stop)`` holds no data record, only transaction markers
        (one not read to its end in time is not among them)."""
        data: set[TP] = set()
        return self._each(gaps, lambda tp, _, __: data.add(tp) or True) - data

    def lanes_back(
        self, spans: dict[TP, tuple[int, int, int]], lanes: Collection[Lane], cap: int | None = None, below: int = 256
    ) -> dict[TP, LanesBack]:
        """Each lane's last stamp before each partition's end, ``spans``: (low, start, end). Read back
        from the end in growing windows until every lane of ``lanes`` is found, the low offset is
        reached, ``below`` offsets under ``start`` are read, or (with ``cap``) ``cap`` offsets are.
        Where lanes interleave, one window of a few records per lane finds them all."""
        out = {tp: LanesBack(end) for tp, (_, _, end) in spans.items()}
        todo = {tp for tp, (low, _, end) in spans.items() if end > low}
        latest: dict[TP, dict[Lane, tuple[int, Stamp]]] = {tp: {} for tp in spans}  # in this round's window

        def visit(tp: TP, offset: int, headers: Any) -> bool:
            if offset >= spans[tp][1]:
                out[tp].data_after_start = True
            stamp = Stamp.from_headers(headers)
            if stamp is not None:
                latest[tp][stamp.lane] = (offset, stamp)
            return False

        window = 8 * (len(lanes) + 1)
        while todo:
            ranges = {tp: (max(spans[tp][0], out[tp].read_from - window), out[tp].read_from) for tp in todo}
            finished = self._each(ranges, visit)
            for tp in list(todo):
                back, (low, start, end) = out[tp], spans[tp]
                for lane, found in latest[tp].items():
                    back.found.setdefault(lane, found)  # a later window's find is the later stamp
                latest[tp].clear()
                if tp not in finished:  # out of time: what was read stands, the rest is unknown
                    todo.discard(tp)
                    continue
                back.read_from = ranges[tp][0]
                back.every_lane = back.read_from <= low or all(lane in back.found for lane in lanes)
                if (
                    back.every_lane
                    or back.read_from <= start - below
                    or (cap is not None and end - back.read_from >= cap)
                ):
                    todo.discard(tp)
            window *= 4
        for tp, back in out.items():
            back.every_lane = back.every_lane or back.read_from <= spans[tp][0]
        return out

    def lanes_ahead(
        self, starts: dict[TP, tuple[int, int]], wanted: dict[TP, set[Lane]]
    ) -> dict[TP, dict[Lane, Stamp]]:
        """Each wanted lane's first stamp in ``[start, end)``, reading forward until all are found."""
        found: dict[TP, dict[Lane, Stamp]] = {tp: {} for tp in starts}

        def visit(tp: TP, _: int, headers: Any) -> bool:
            stamp = Stamp.from_headers(headers)
            if stamp is not None and stamp.lane in wanted[tp]:
                found[tp].setdefault(stamp.lane, stamp)
            return len(found[tp]) == len(wanted[tp])

        self._each({tp: span for tp, span in starts.items() if wanted[tp]}, visit)
        return found

    # -- the backlog ------------------------------------------------------------------------

    def backlog(self, specs: list[StageSpec]) -> list[PartitionBacklog]:
        tps_of = {s: [(s.topic, p) for p in self.partitions(s.topic)] for s in specs}
        marks = self.watermarks(sorted({tp for tps in tps_of.values() for tp in tps}))
        lanes = set(self.partitions(self.settings.arrivals)) if any(s.stamped for s in specs) else set()
        opened = self.open_transactions({tp: end for tp, (_, end) in marks.items()})
        rows = []
        for layer in _layers(specs):  # each partition once per read: two groups of one topic in two
            positions = {}
            for spec in layer:
                committed = self.committed(spec.group, tps_of[spec])
                positions[spec] = [
                    PartitionPosition(t, p, committed.get((t, p)), *marks[(t, p)]) for t, p in tps_of[spec]
                ]
            rows += self._rows(positions, lanes, opened)
        return rows

    def _rows(
        self, positions: dict[StageSpec, list[PartitionPosition]], lanes: set[Lane], opened: dict[TP, float]
    ) -> list[PartitionBacklog]:
        """The backlog of groups reading distinct topics."""
        stamped = {(p.topic, p.partition): p for spec, ps in positions.items() if spec.stamped for p in ps}
        plain = [pos for spec, ps in positions.items() if not spec.stamped for pos in ps]
        # Is anything but transaction markers left after the committed offset? One record tells.
        plain_drained = self.markers_only({(p.topic, p.partition): (p.start, p.end) for p in plain})
        back = self.lanes_back({tp: (p.low, p.start, p.end) for tp, p in stamped.items()}, lanes, cap=BACK_CAP)
        ahead = self.lanes_ahead(
            {tp: (p.start, p.end) for tp, p in stamped.items()},
            {tp: back[tp].lanes_from(p.start) for tp, p in stamped.items()},
        )
        rows = []
        for spec, ps in positions.items():
            for pos in ps:
                tp = (pos.topic, pos.partition)
                if not spec.stamped:
                    if tp in plain_drained:  # only transaction markers after the committed offset
                        pos = PartitionPosition(pos.topic, pos.partition, pos.end, pos.low, pos.end)
                    rows.append(
                        partition_backlog(spec.stage, spec.group, pos, {}, {}, False, held_since=opened.get(tp))
                    )
                    continue
                lanes_back = back[tp]
                if lanes_back.drained(pos.start):
                    pos = PartitionPosition(pos.topic, pos.partition, pos.end, pos.low, pos.end)
                rows.append(
                    partition_backlog(
                        spec.stage,
                        spec.group,
                        pos,
                        ahead[tp],
                        lanes_back.stamps(),
                        held_since=opened.get(tp),
                        complete=lanes_back.every_lane or lanes_back.read_from <= pos.start,
                        every_lane=lanes_back.every_lane,
                    )
                )
        return rows


def _layers(specs: list[StageSpec]) -> list[list[StageSpec]]:
    """The specs in as few layers as keep each topic once per layer (in order)."""
    layers: list[list[StageSpec]] = []
    for spec in specs:
        layer = next((layer for layer in layers if all(s.topic != spec.topic for s in layer)), None)
        if layer is None:
            layers.append(layer := [])
        layer.append(spec)
    return layers


def lane_totals(settings: Settings, topics: list[str], lanes: Collection[Lane]) -> list[tuple[TP, Stamp]]:
    """Each lane's last stamp in every partition of ``topics`` (its running totals there), read back
    to the low offset where need be: a lane that wrote nowhere near a partition's end is read far."""
    reader = OffsetsReader(settings)
    try:
        tps = [(t, p) for t in topics for p in reader.partitions(t)]
        spans = {tp: (low, low, end) for tp, (low, end) in reader.watermarks(tps).items()}
        return [
            (tp, stamp)
            for tp, back in reader.lanes_back(spans, lanes).items()
            for lane, stamp in back.stamps().items()
            if lane in lanes
        ]
    finally:
        reader.close()
