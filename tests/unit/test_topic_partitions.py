"""A deployment's partition counts over the catalog's (settings: topic_partitions)."""

from __future__ import annotations

import json

import pytest

from pipeline.catalog import load_catalog, settings_catalog
from pipeline.config import Settings
from pipeline.errors import ConfigError

BUCKETS = ("short", "long")


def partitions(overrides: dict[str, int] | None = None) -> dict[str, int]:
    return {t.name: t.partitions for t in load_catalog(BUCKETS, partitions=overrides)}


def test_an_override_sets_that_topic_only() -> None:
    before, after = partitions(), partitions({"audio.bucket.long": 20})
    assert after["audio.bucket.long"] == 20 and before["audio.bucket.long"] == 6
    assert {k: v for k, v in after.items() if k != "audio.bucket.long"} == {
        k: v for k, v in before.items() if k != "audio.bucket.long"
    }


def test_markers_and_redrives_keep_the_arrivals_partition_count() -> None:
    got = partitions({"audio.arrivals": 12})
    assert got["audio.arrivals"] == got["router.seen"] == got["router.retry"] == 12
    assert partitions()["router.seen"] == partitions()["audio.arrivals"]


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"router.seen": 12}, "has the partitions of audio.arrivals; set audio.arrivals"),
        ({"audio.bucket.medium": 8}, "no topic audio.bucket.medium"),  # not a configured bucket
        ({"audio.bucket.long": 0}, "whole number of partitions >= 1"),
    ],
)
def test_a_bad_override_is_refused_with_its_reason(overrides: dict[str, int], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_catalog(BUCKETS, partitions=overrides)


def test_the_setting_reads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLQA_TOPIC_PARTITIONS", json.dumps({"audio.bucket.long": 16}))
    specs = {t.name: t for t in settings_catalog(Settings(bucket_names=BUCKETS, bucket_edges_s=(60.0,)))}
    assert specs["audio.bucket.long"].partitions == 16 and specs["audio.bucket.short"].partitions == 6
