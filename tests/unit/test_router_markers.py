"""The router's per-partition markers (pure), and the catalog rules they rely on."""

from __future__ import annotations

import pytest

from pipeline.catalog import LiveTopic, load_catalog, plan_changes, same_config_value
from pipeline.errors import StackError
from pipeline.stages.markers import (
    MarkerRead,
    MarkerSet,
    MarkerTable,
    check_co_partitioned,
    marker_digest,
    parse_marker,
)


def read(**markers: float | None) -> MarkerRead:
    found = MarkerRead()
    for identity, routed_at in markers.items():
        found.record(identity, routed_at)
    return found


def test_a_partition_is_ready_only_after_its_markers_are_loaded() -> None:
    table = MarkerTable()
    plans = table.assign([0, 2])
    assert [(p.partition, p.start_offset) for p in plans] == [(0, 0), (2, 0)]
    assert not table.is_ready(0)
    with pytest.raises(KeyError):
        table.seen(0)
    assert table.loaded(plans[0], read(a=1.0), next_offset=7)
    assert table.is_ready(0) and not table.is_ready(2)
    assert "a" in table.seen(0) and "b" not in table.seen(0) and len(table.seen(0)) == 1
    assert not table.is_ready(1)  # not ours


def test_a_kept_partition_catches_up_from_where_it_stopped_and_a_lost_one_is_dropped() -> None:
    table = MarkerTable()
    p0, p1 = table.assign([0, 1])
    table.loaded(p0, read(a=1.0), next_offset=10)
    table.loaded(p1, read(b=1.0), next_offset=4)
    table.sent(0, "c", arrival_offset=3)  # routed here meanwhile, and committed
    table.committed(0, next_offset=4)
    table.revoke([0, 1])
    assert not table.is_ready(0)
    (again,) = table.assign([0])  # 1 went to another router
    assert (again.partition, again.start_offset) == (0, 10)
    assert table.owned == [0]
    table.loaded(again, read(d=3.0), next_offset=12)  # what another owner routed in between
    assert all(i in table.seen(0) for i in "acd") and len(table) == 3
    (back,) = table.assign([1])  # 1 comes back later: read in full again
    assert back.start_offset == 0 and table.owned == [1]


def test_a_marker_counts_once_sent_and_is_kept_only_once_its_transaction_committed() -> None:
    """Issue 26 item 12: a revoke between send and commit. The router sent y's marker in the
    open transaction of arrival 6; the partition is revoked before that transaction commits, so it
    may abort (a new owner's producer fences it) and arrival 6 is delivered again. The catch-up
    read finds only committed markers; y must not be known from memory, or its re-delivered
    arrival would be skipped as a duplicate and never routed."""
    table = MarkerTable()
    (plan,) = table.assign([0])
    table.loaded(plan, read(), next_offset=0)
    table.sent(0, "x", arrival_offset=5)
    table.sent(0, "y", arrival_offset=6)
    assert "x" in table.seen(0) and "y" in table.seen(0)  # a second arrival in the same transaction: duplicate
    assert table.committed(0, next_offset=6) == 1  # offsets up to 5 committed, with x's marker
    assert table.revoke([0]) == 1  # y's transaction is not known to have committed
    (again,) = table.assign([0])
    assert again.start_offset == 0
    table.loaded(again, read(x=1.0), next_offset=1)  # what router.seen holds: y's marker was aborted
    assert "x" in table.seen(0) and "y" not in table.seen(0)


def test_a_marker_sent_while_its_partition_was_revoked_is_not_kept() -> None:
    table = MarkerTable()
    (plan,) = table.assign([0])
    table.loaded(plan, read(), next_offset=0)
    table.revoke([0])  # during the event's sends
    table.sent(0, "z", arrival_offset=9)
    table.committed(0, next_offset=10)  # a commit of another partition's range, say; z was never kept
    (again,) = table.assign([0])
    table.loaded(again, read(), next_offset=0)
    assert "z" not in table.seen(0)
    assert table.committed(7, next_offset=3) == 0  # not ours: nothing


def test_a_read_from_a_superseded_assignment_merges_but_does_not_make_ready() -> None:
    table = MarkerTable()
    (old,) = table.assign([3])
    (new,) = table.assign([3])  # a second rebalance while the first read ran
    assert not table.loaded(old, read(x=1.0), next_offset=5)
    assert not table.is_ready(3)
    assert table.loaded(new, read(y=1.0), next_offset=6)
    assert "x" in table.seen(3) and "y" in table.seen(3)
    table.assign([])
    assert not table.loaded(new, read(z=1.0), next_offset=9)  # given away: nothing comes back
    assert table.owned == [] and len(table) == 0


def test_a_tombstone_removes_a_marker_and_the_later_record_wins() -> None:
    table = MarkerTable()
    (plan,) = table.assign([0])
    table.loaded(plan, read(a=1.0, b=1.0), next_offset=2)
    table.revoke([0])
    (plan,) = table.assign([0])
    table.loaded(plan, read(a=None), next_offset=3)
    assert "a" not in table.seen(0) and "b" in table.seen(0)
    within = MarkerRead()
    for identity, routed_at in [("c", 1.0), ("c", None), ("d", None), ("d", 2.0)]:
        within.record(identity, routed_at)
    assert within.records == 4
    table.revoke([0])
    (plan,) = table.assign([0])
    table.loaded(plan, within, next_offset=7)
    assert "c" not in table.seen(0) and "d" in table.seen(0)


def test_markers_are_held_as_digests_of_their_identity() -> None:
    seen = MarkerSet()
    seen.sent("rec/a.wav#0123456789abcdef0123456789abcdef", arrival_offset=0)
    seen.committed(next_offset=1)
    assert "rec/a.wav#0123456789abcdef0123456789abcdef" in seen
    assert "rec/a.wav#0123456789abcdef0123456789abcdee" not in seen
    assert 5 not in seen  # type: ignore[operator]
    assert len(marker_digest("rec/a.wav#e")) == 16


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (b"rec/a.wav#e", b"1764570000.5", ("rec/a.wav#e", 1764570000.5)),
        (b"rec/a.wav#e", None, ("rec/a.wav#e", None)),
        (None, b"1.0", None),
        (b"rec/a.wav#e", b"not a time", None),
        (b"\xff\xfe", b"1.0", None),
    ],
)
def test_marker_records(key: bytes | None, value: bytes | None, expected: object) -> None:
    assert parse_marker(key, value) == expected


def test_markers_and_arrivals_must_have_the_same_partition_count() -> None:
    check_co_partitioned({"audio.arrivals": 6, "router.seen": 6}, "audio.arrivals", "router.seen")
    with pytest.raises(StackError, match="router.seen has 3 partitions and audio.arrivals 6"):
        check_co_partitioned({"audio.arrivals": 6, "router.seen": 3}, "audio.arrivals", "router.seen")


def test_the_catalog_keeps_markers_co_partitioned_and_gives_them_a_time_to_live() -> None:
    specs = {s.name: s for s in load_catalog(("short", "long"))}
    seen, arrivals = specs["router.seen"], specs["audio.arrivals"]
    assert seen.partitions == arrivals.partitions
    assert same_config_value("cleanup.policy", seen.config["cleanup.policy"], "delete,compact")
    # longer than the replay window: an arrival that can still be replayed finds its marker
    assert int(seen.config["retention.ms"]) > int(arrivals.config["retention.ms"])
    assert int(seen.config["segment.ms"]) < int(seen.config["retention.ms"])


def test_a_compact_only_marker_topic_drifts_and_list_order_does_not() -> None:
    (seen,) = [s for s in load_catalog(("short",)) if s.name == "router.seen"]
    old = LiveTopic(partitions=6, replication_factor=1, config={"cleanup.policy": "compact"})
    changes = plan_changes([seen], {"router.seen": old})
    assert [(c.action, c.detail["set"].get("cleanup.policy")) for c in changes] == [("alter_config", "compact,delete")]
    same = LiveTopic(partitions=6, replication_factor=1, config={**seen.config, "cleanup.policy": "delete,compact"})
    assert plan_changes([seen], {"router.seen": same}) == []
    assert not same_config_value("cleanup.policy", "compact,delete", "compact")
    assert not same_config_value("retention.ms", "1", None)
