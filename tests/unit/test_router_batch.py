"""The Faust router's batches: arrivals probed together, decided in arrival order.

A batch must give what the same arrivals one at a time give: an object arriving twice in one
batch is routed once, partitions are chosen in arrival order, a bad input is still one letter.
"""

from __future__ import annotations

from collections.abc import Container
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.adapters.file_store import FileStore
from pipeline.config import Settings
from pipeline.events import AudioArrived, ObjectRef, RoutedCall, SourcePosition, decode, encode
from pipeline.headers import PartitionProgress
from pipeline.run.router_step import ArrivalStep
from pipeline.stages.markers import MarkerSet
from pipeline.stages.outcomes import Dead
from pipeline.stages.outputs import SEEN, Received, Record, Writer
from pipeline.stages.router import ArrivalRouter, Outcome, Routed, SeenInBatch, Skipped
from pipeline.stages.routing import Buckets
from tests import audio

BUCKETS = Buckets((30.0,), ("short", "long"))


def _step(partitions: int = 3) -> ArrivalStep:
    router = ArrivalRouter(store=FileStore(), buckets=BUCKETS, partitions_of=lambda b: partitions, max_duration_s=3600)
    return ArrivalStep(router, Writer(group="callqa-router"), PartitionProgress(), "router.retry")


def _received(path: Path, offset: int, partition: int = 0) -> Received:
    payload = encode(AudioArrived(object=ObjectRef(bucket="file", key=str(path))))
    return Received(payload, str(path).encode(), SourcePosition(topic="audio.arrivals", partition=partition,
                                                                 offset=offset))


def _batch(step: ArrivalStep, batch: list[Received],
           seen_of: dict[int, Container[str]]) -> list[tuple[Outcome, list[Record]]]:
    """As the agent does: every probe at once on threads, then one ordered decision."""
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(step.inspect, r, seen_of[r.source.partition if r.source else -1]) for r in batch]
        inspected = [f.result() for f in futures]
    return step.decide_batch(list(zip(batch, inspected)), seen_of)


def _one_at_a_time(step: ArrivalStep, batch: list[Received]) -> list[tuple[Outcome, list[Record]]]:
    """The router before batches: route, plan, and the markers count for the next arrival."""
    seen: dict[int, set[str]] = {}
    results = []
    for received in batch:
        partition_seen = seen.setdefault(received.source.partition if received.source else -1, set())
        outcome = step.route(received, partition_seen)
        records = step.plan(outcome, received)
        partition_seen.update(r.key.decode() for r in records if r.topic == SEEN and r.key is not None)
        results.append((outcome, records))
    return results


def _routed(records: list[Record]) -> list[RoutedCall]:
    return [decode(r.value, RoutedCall) for r in records if r.topic.startswith("audio.bucket.")]


def test_an_object_arriving_twice_in_one_batch_is_routed_once(tmp_path: Path) -> None:
    path = audio.write(tmp_path / "c.wav", 12.0, 8000, 2, subtype="ULAW")
    batch = [_received(path, 0), _received(path, 1)]
    results = _batch(_step(), batch, {0: MarkerSet()})
    first, second = (outcome for outcome, _ in results)
    assert isinstance(first, Routed)
    assert second == Skipped("duplicate")
    records = [r for _, rs in results for r in rs]
    assert len(_routed(records)) == 1
    assert [r.key for r in records if r.topic == SEEN] == [first.dedup_key.encode()]


def test_a_batch_decides_as_one_arrival_at_a_time_would(tmp_path: Path) -> None:
    files = [audio.write(tmp_path / f"c{i}.wav", d, 8000, 2, subtype="ULAW")
             for i, d in enumerate([5.0, 40.0, 12.0, 3.0, 50.0, 7.0])]
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    order = [files[0], files[1], files[0], empty, files[2], files[3], files[1], files[4], files[5], files[3]]
    batch = [_received(p, offset) for offset, p in enumerate(order)]
    batched = _batch(_step(), batch, {0: MarkerSet()})
    alone = _one_at_a_time(_step(), batch)

    def shape(results: list[tuple[Outcome, list[Record]]]) -> list[tuple[object, ...]]:
        out: list[tuple[object, ...]] = []
        for outcome, records in results:
            if isinstance(outcome, Routed):
                out.append(("routed", outcome.call.call_id, outcome.call.bucket, outcome.partition,
                            [(r.topic, r.key, r.partition) for r in records]))
            elif isinstance(outcome, Dead):
                out.append(("dead", outcome.letter.reason, [r.topic for r in records]))
            else:
                out.append(("skipped", outcome.why, records))
        return out

    assert shape(batched) == shape(alone)
    kinds = [s[0] for s in shape(batched)]
    assert kinds == ["routed", "routed", "skipped", "dead", "routed", "routed", "skipped", "routed", "routed",
                     "skipped"]
    assert len({c.call_id for _, rs in batched for c in _routed(rs)}) == 6


def test_markers_known_before_the_batch_skip_without_a_probe(tmp_path: Path) -> None:
    path = audio.write(tmp_path / "c.wav", 12.0, 8000, 2, subtype="ULAW")
    step = _step()
    [(routed, _)] = _batch(step, [_received(path, 0)], {0: MarkerSet()})
    assert isinstance(routed, Routed)
    before = MarkerSet()
    before.sent(routed.dedup_key, 0)
    assert step.inspect(_received(path, 1), before) == Skipped("duplicate")  # no probe: skipped at the stat
    [(again, records)] = _batch(step, [_received(path, 1)], {0: before})
    assert again == Skipped("duplicate") and records == []


def test_the_in_batch_check_is_per_arrivals_partition(tmp_path: Path) -> None:
    """Markers live per partition: a marker planned on partition 0 says nothing about partition 1
    (as before batches, where each partition's marker set was checked alone)."""
    path = audio.write(tmp_path / "c.wav", 12.0, 8000, 2, subtype="ULAW")
    batch = [_received(path, 0, partition=0), _received(path, 0, partition=1)]
    results = _batch(_step(), batch, {0: MarkerSet(), 1: MarkerSet()})
    assert [type(o) for o, _ in results] == [Routed, Routed]
    assert [r.partition for _, rs in results for r in rs if r.topic == SEEN] == [0, 1]


def test_a_failure_while_deciding_is_a_letter_not_an_exception(tmp_path: Path) -> None:
    """Raised into the agent, Faust would acknowledge and skip the whole batch."""
    path = audio.write(tmp_path / "c.wav", 12.0, 8000, 2, subtype="ULAW")

    def no_partitions(bucket: str) -> int:
        raise KeyError(bucket)

    step = _step()
    step.router.partitions_of = no_partitions
    [(outcome, records)] = _batch(step, [_received(path, 0)], {0: MarkerSet()})
    assert isinstance(outcome, Dead) and outcome.letter.reason == "internal_error"
    assert [r.topic for r in records] == ["router.dlq"]


def test_seen_in_batch_holds_what_was_known_and_what_the_batch_produced() -> None:
    before = MarkerSet()
    before.sent("a", 0)
    seen = SeenInBatch(before)
    assert "a" in seen and "b" not in seen
    seen.add("b")
    assert "b" in seen and "b" not in before  # the partition's table is not touched
    assert 3 not in seen


def test_router_batch_settings() -> None:
    settings = Settings()
    assert settings.router_batch_max > 1 and settings.router_probe_threads > 1
    assert 0 < settings.router_batch_window_s <= 0.1
    with pytest.raises(ValidationError):
        Settings(router_batch_window_s=0)  # Faust's take would wait for a full batch forever
    with pytest.raises(ValidationError):
        Settings(router_batch_max=0)
