"""Router de-dup markers across a hand-over: two routers in one group, a partition moves, a re-put routes once."""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.adapters.minio_store import storage_client
from pipeline.adapters.publisher import sarama_partition
from pipeline.config import Settings
from pipeline.events import RoutedCall, decode
from pipeline.stack.minio import prepare_bucket
from tests import audio
from tests.kafka_helpers import TopicReader
from tests.processes import spawn, stop

pytestmark = pytest.mark.integration
BUCKET_TOPICS = [f"audio.bucket.{b}" for b in ("short", "medium", "long", "xlong")]
ARRIVAL_PARTITIONS = 6  # audio.arrivals in the catalog


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            row = json.loads(line)
            if row.get("event") == event:
                rows.append(row)
    return rows


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = 90) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_partition_handed_over_keeps_its_markers_and_a_re_put_routes_once(
    stack_settings: Settings, unique: str, tmp_path: Path
) -> None:
    settings = stack_settings.model_copy(update={"recordings_bucket": f"rec-{unique}"})
    client = storage_client(settings)
    prepare_bucket(client, settings.recordings_bucket)
    reader = TopicReader(settings, BUCKET_TOPICS)
    logs = {name: tmp_path / f"router-{name}.log" for name in ("a", "b")}
    procs = {}
    try:
        procs["a"] = spawn(settings, logs["a"], "router", "--app-id", f"router-{unique}")
        wait_until(lambda: log_events(logs["a"], "markers_loaded"), "router a to load its markers")
        # b joins after a holds every partition and has loaded them: what a routes from now on,
        # b can only know by reading the markers when it takes a's partitions over.
        procs["b"] = spawn(settings, logs["b"], "router", "--app-id", f"router-{unique}")
        wait_until(
            lambda: log_events(logs["b"], "markers_loaded") and len(log_events(logs["a"], "markers_loaded")) >= 2,
            "the group to settle with two routers",
        )
        # x goes to a partition b owns: a held it before b joined, lost it to b, and gets it back
        # when b leaves (the case where Faust reused a fenced transactional producer).
        partition = log_events(logs["b"], "markers_loaded")[-1]["partitions"][0]

        def on_partition(stem: str) -> str:
            return next(
                f"{stem}{i}.wav"
                for i in range(10_000)
                if sarama_partition(f"{settings.recordings_bucket}/{stem}{i}.wav".encode(), ARRIVAL_PARTITIONS)
                == partition
            )

        x, follower = on_partition("x"), on_partition("z")
        data = audio.write(tmp_path / "x.wav", 3.0, 8000).read_bytes()
        client.put_object(settings.recordings_bucket, x, io.BytesIO(data), len(data))

        def ours() -> list[RoutedCall]:
            calls = [decode(m.value(), RoutedCall) for m in reader.messages]
            return [c for c in calls if c.object.bucket == settings.recordings_bucket]

        reader.wait_for(lambda _: len(ours()), 1, timeout_s=90, settle_s=1)
        routed_by = {
            name: [r["partition"] for r in log_events(path, "call_routed") if r["call_id"] == x.removesuffix(".wav")]
            for name, path in logs.items()
        }
        assert routed_by == {"a": [], "b": [partition]}
        taken = len(log_events(logs["a"], "markers_loaded"))

        stop(procs["b"])  # a clean leave: a takes every partition
        wait_until(
            lambda: [r for r in log_events(logs["a"], "markers_loaded")[taken:] if partition in r["partitions"]],
            f"a to load the markers of partition {partition}",
        )

        client.put_object(settings.recordings_bucket, x, io.BytesIO(data), len(data))  # same content again
        # A later arrival on the same partition: once it is routed, the re-put before it was seen.
        client.put_object(settings.recordings_bucket, follower, io.BytesIO(data), len(data))
        reader.wait_for(lambda _: len(ours()), 2, timeout_s=90, settle_s=5)
        counts = Counter(c.call_id for c in ours())
        assert counts == Counter({x.removesuffix(".wav"): 1, follower.removesuffix(".wav"): 1})
        assert [r for r in log_events(logs["a"], "call_routed") if r["partition"] == partition]
        assert procs["a"].poll() is None, "router a stopped"
    finally:
        for proc in procs.values():
            stop(proc)
        reader.close()


def test_topics_apply_gives_an_existing_compact_only_marker_topic_its_time_to_live(isolated_settings: Settings) -> None:
    """A cluster set up before markers had a time-to-live: `topics apply` alters cleanup.policy in place."""
    from pipeline.adapters.kafka_admin import apply_catalog, describe
    from pipeline.catalog import load_catalog

    specs = load_catalog(isolated_settings.bucket_names)
    before = [
        s if s.name != "router.seen" else type(s)(**{**s.__dict__, "config": {"cleanup.policy": "compact"}})
        for s in specs
    ]
    apply_catalog(isolated_settings, before)
    seen = next(row for row in describe(isolated_settings, specs) if row["topic"].endswith("router.seen"))
    assert not seen["in_sync"] and seen["live"]["config"]["cleanup.policy"] == "compact"
    changes = apply_catalog(isolated_settings, specs)
    assert [(c.topic.removeprefix(isolated_settings.topic_prefix), c.action) for c in changes] == [
        ("router.seen", "alter_config")
    ]
    assert changes[0].detail["set"] == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "1209600000",
        "segment.ms": "86400000",
    }

    def seen_in_sync() -> bool:  # a config change reaches describe through the metadata log
        return next(row for row in describe(isolated_settings, specs) if row["topic"].endswith("router.seen"))[
            "in_sync"
        ]

    wait_until(seen_in_sync, "router.seen to show the new config", timeout_s=30)
    assert apply_catalog(isolated_settings, specs) == []
