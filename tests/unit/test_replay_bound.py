"""A bounded replay's decisions: which records it drops, when its group is done, what it prints."""

from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.stages.replay_bound import GroupAt, ReplayTally, StopOffsets, gaps, progress, summary, unfinished

BOUND = StopOffsets("t1.asr.transcripts", {0: 5, 1: 3, 2: 0})


def test_the_flag_round_trips_and_bad_ones_are_refused() -> None:
    assert BOUND.flag() == "t1.asr.transcripts:0=5,1=3,2=0"
    assert StopOffsets.parse(BOUND.flag()) == BOUND
    assert StopOffsets.parse("audio.bucket.long:3=7") == StopOffsets("audio.bucket.long", {3: 7})
    for bad in ("", "topic", "topic:", ":0=1", "t:0=1,0=2", "t:a=1", "t:0=-1", "t:0=1;1=2", "t:0"):
        with pytest.raises(ConfigError):
            StopOffsets.parse(bad)


def test_a_replay_keeps_only_records_before_the_stop_offset_of_their_partition() -> None:
    assert BOUND.keeps("t1.asr.transcripts", 0, 4)
    assert not BOUND.keeps("t1.asr.transcripts", 0, 5)  # arrived after the replay started
    assert not BOUND.keeps("t1.asr.transcripts", 2, 0)  # an unselected partition: started at its end
    assert not BOUND.keeps("t1.asr.transcripts", 7, 0)  # a partition added after the start holds only newer records
    assert BOUND.keeps("t1.qa.retry", 0, 99)  # a redrive addressed to this group: not the bound's to drop


def test_the_bound_must_name_the_stages_input() -> None:
    BOUND.check_topic("t1.asr.transcripts")
    with pytest.raises(ConfigError, match="audio.bucket.short"):
        BOUND.check_topic("audio.bucket.short")


def at(**committed: int | None) -> list[GroupAt]:
    return [GroupAt(int(p[1:]), c, 0) for p, c in committed.items()]


def test_the_group_is_done_when_every_partition_reached_its_stop_offset() -> None:
    assert progress(BOUND, at(p0=5, p1=3, p2=0), markers_only=set()).done
    assert progress(BOUND, at(p0=9, p1=3, p2=4), markers_only=set()).done  # past it: the QA stage acks skipped records


def test_a_partition_short_of_its_stop_offset_is_not_done_unless_only_markers_are_left() -> None:
    # The last record at 3, its transaction's commit marker at 4: committed 4, stop 5.
    now = at(p0=4, p1=3, p2=0)
    assert gaps(BOUND, now) == {0: (4, 5)}
    assert not progress(BOUND, now, markers_only=set()).done
    assert progress(BOUND, now, markers_only=set()).left == {0: (4, 5)}
    assert progress(BOUND, now, markers_only={0}).done


def test_another_members_partition_still_being_worked_on_keeps_every_member_running() -> None:
    # This member's partitions 0 and 2 are done; partition 1 moved to another member in a rebalance.
    working = progress(BOUND, at(p0=5, p1=1, p2=0), markers_only=set())
    assert not working.done and working.left == {1: (1, 3)}


def test_a_partition_never_committed_or_below_retention_starts_at_its_low_offset() -> None:
    bound = StopOffsets("t", {0: 10, 1: 10})
    now = [GroupAt(0, None, 2), GroupAt(1, 1, 10)]  # 1: retention removed everything before the stop
    assert gaps(bound, now) == {0: (2, 10)}
    assert not progress(bound, now, markers_only=set()).done


def test_the_summary_is_one_line_with_the_records_and_the_stop_offsets() -> None:
    tally = ReplayTally()
    tally.count(0)
    tally.count(1)
    tally.count(1)
    line = summary("qa-r3", BOUND, tally)
    assert "\n" not in line
    assert (
        line
        == "replay done: group qa-r3 at its stop offsets t1.asr.transcripts:0=5,1=3,2=0; 3 record(s) processed here (0:1, 1:2)"
    )


def test_a_replay_stopped_early_says_where_the_group_is() -> None:
    tally = ReplayTally()
    assert not tally.finished and "not checked yet" in unfinished("g", BOUND, tally)
    tally.last = progress(BOUND, at(p0=4, p1=1, p2=0), markers_only={0})
    assert not tally.finished
    assert "group g on t1.asr.transcripts at 1: 1 of 3;" in unfinished("g", BOUND, tally)
    tally.last = progress(BOUND, at(p0=5, p1=3, p2=0), markers_only=set())
    assert tally.finished
