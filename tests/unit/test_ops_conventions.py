"""The operator commands' shared pieces: times with zones, properties files, lag exit codes,
the topic diff, and the offsets files of `replay reset --export / --from-file`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pipeline.catalog import LiveTopic, TopicSpec, plan_changes
from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.ops.kafka_props import parse_properties, with_kafka
from pipeline.ops.lag import exit_code
from pipeline.ops.offsets_file import format_offsets, parse_offsets
from pipeline.ops.times import next_clock_time, parse_time, zone_label
from pipeline.ops.topic_diff import diff_lines

SHANGHAI = ZoneInfo("Asia/Shanghai")


# --- times --------------------------------------------------------------------------------------

def test_an_explicit_zone_is_taken_as_given_in_every_form() -> None:
    want = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
    for text in ("2026-11-30T22:00+08:00", "2026-11-30T14:00Z", "2026-11-30T14:00:00+00:00",
                 "2026-11-30T22:00 Asia/Shanghai", "2026-11-30 22:00 Asia/Shanghai", "2026-11-30T14:00 UTC"):
        assert parse_time(text, zone=ZoneInfo("America/New_York")) == want, text


def test_a_time_without_a_zone_is_read_in_the_given_zone_or_the_local_one() -> None:
    assert parse_time("2026-11-30T22:00", zone=SHANGHAI) == datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
    local = parse_time("2026-11-30T22:00")
    assert local.tzinfo is not None and local == datetime(2026, 11, 30, 22, 0).astimezone()
    # a daylight-saving zone gets the offset of that date, not of today
    assert parse_time("2026-07-01T12:00", zone=ZoneInfo("Europe/Berlin")).utcoffset() == timedelta(hours=2)
    assert parse_time("2026-12-01T12:00", zone=ZoneInfo("Europe/Berlin")).utcoffset() == timedelta(hours=1)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01T00:00", "2026-11-30T22:00 Mars/Olympus",
                                  "2026-11-30T22:00+08:00 Asia/Shanghai"])
def test_bad_times_are_refused_with_the_forms_accepted(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_a_clock_time_is_the_next_one_in_its_zone() -> None:
    now = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)  # 07:00 on Dec 1 in Shanghai
    assert next_clock_time("06:00Z", now) == datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    assert next_clock_time("23:30+00:00", now) == datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    # 06:00 in Shanghai has passed there today (it is 07:00): the next is Dec 2, 06:00 +08:00
    assert next_clock_time("06:00+08:00", now) == datetime(2026, 12, 2, 6, 0, tzinfo=timezone(timedelta(hours=8)))
    assert next_clock_time("06:00 Asia/Shanghai", now) == datetime(2026, 12, 2, 6, 0, tzinfo=SHANGHAI)
    assert next_clock_time("08:00 Asia/Shanghai", now) == datetime(2026, 12, 1, 8, 0, tzinfo=SHANGHAI)
    assert next_clock_time("2026-12-01T06:00Z", now) == datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    local = next_clock_time("06:00", now)
    assert local.tzinfo is not None and local >= now and (local.hour, local.minute) == (6, 0)
    assert local - now <= timedelta(days=1)
    with pytest.raises(ValueError, match="HH:MM"):
        next_clock_time("6am", now)


def test_a_clock_time_skipped_by_daylight_saving_is_not_before_now() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 3, 29, 0, 30, tzinfo=berlin)  # 02:30 does not exist that night
    end = next_clock_time("02:30 Europe/Berlin", now)
    assert end >= now and end - now < timedelta(days=2)


def test_zone_label_names_the_offset() -> None:
    assert zone_label(datetime(2026, 11, 30, tzinfo=UTC)) == "UTC+00:00"
    assert zone_label(datetime(2026, 11, 30, tzinfo=SHANGHAI)) == "UTC+08:00 (CST)"


# --- properties files ---------------------------------------------------------------------------

def test_properties_file_lines_comments_and_values_with_equals_signs() -> None:
    text = "# admin client\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism=PLAIN\n" \
           "sasl.password=s3cr=t#x\n  # indented comment\nbootstrap.servers=kafka:9093\n"
    assert parse_properties(text) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                      "sasl.password": "s3cr=t#x", "bootstrap.servers": "kafka:9093"}


def test_a_bad_properties_line_names_the_line_never_its_value() -> None:
    with pytest.raises(ConfigError) as err:
        parse_properties("sasl.mechanism=PLAIN\nhunter2-secret\n", "admin.properties")
    assert "admin.properties line 2" in str(err.value) and "hunter2" not in str(err.value)


def test_command_kafka_settings_lay_over_the_configured_ones() -> None:
    base = Settings(kafka_bootstrap="a:9092", kafka_config={"security.protocol": "SASL_SSL", "sasl.username": "pipe"})
    assert with_kafka(base) is base
    over = with_kafka(base, None, {"sasl.username": "ops", "bootstrap.servers": "b:9093"})
    assert over.kafka_common() == {"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
                                   "sasl.username": "ops"}
    assert with_kafka(base, "c:9094", {"bootstrap.servers": "b:9093"}).kafka_bootstrap == "c:9094"
    assert base.kafka_bootstrap == "a:9092"  # only that command's copy changes
    assert "***" in str(with_kafka(base, None, {"sasl.password": "x"}).redacted()["kafka_config"])


# --- lag exit codes -----------------------------------------------------------------------------

def test_lag_exits_by_its_worst_verdict() -> None:
    assert exit_code([]) == 0
    assert exit_code(["done", "on track", "no window"]) == 0
    assert exit_code(["done", "at risk"]) == 1
    assert exit_code(["at risk", "stalled", "done"]) == 2
    assert exit_code(["no rate yet", "done"]) == 3
    assert exit_code(["no rate yet", "at risk"]) == 1  # a known problem over an unknown
    assert exit_code(["stalled", "no rate yet"]) == 2


# --- topic diff ---------------------------------------------------------------------------------

def test_topic_diff_lists_creates_partition_and_config_changes() -> None:
    specs = [TopicSpec(name="a", partitions=6, replication_factor=1, config={"retention.ms": "100"}, key="k", values=()),
             TopicSpec(name="b", partitions=12, replication_factor=3,
                       config={"retention.ms": "200", "cleanup.policy": "delete"}, key="k", values=()),
             TopicSpec(name="c", partitions=2, replication_factor=1, config={}, key="k", values=())]
    live = {"p.b": LiveTopic(6, 1, {"retention.ms": "100"}), "p.c": LiveTopic(4, 1, {})}
    assert diff_lines(plan_changes(specs, live, "p.")) == [
        "p.a: create (6 partitions, replication 1, retention.ms=100)",
        "p.b: partitions 6 -> 12",
        "p.b: replication 1 -> 3 (manual step: Kafka cannot do this in place)",
        "p.b: config cleanup.policy (unset) -> delete",
        "p.b: config retention.ms 100 -> 200",
        "p.c: partitions 4 -> 2 (manual step: Kafka cannot do this in place)",
    ]


# --- offsets files ------------------------------------------------------------------------------

def test_offsets_file_round_trips_in_kafka_consumer_groups_format() -> None:
    offsets = {("audio.bucket.long", 1): 40, ("audio.bucket.long", 0): 7}
    text = format_offsets(offsets)
    assert text == "audio.bucket.long,0,7\naudio.bucket.long,1,40\n"
    assert parse_offsets(text) == offsets
    assert parse_offsets("t,0,5\n\n t , 1 , 6 \n") == {("t", 0): 5, ("t", 1): 6}


@pytest.mark.parametrize("text", ["t,0\n", "t,x,5\n", "t,0,-1\n", ",0,1\n", "t,0,1\nt,0,2\n"])
def test_bad_offsets_files_are_refused_by_line(text: str) -> None:
    with pytest.raises(ConfigError, match="line"):
        parse_offsets(text)
