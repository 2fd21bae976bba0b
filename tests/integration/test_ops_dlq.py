"""`callqa dlq` on the real stack: a missing object is dead-lettered, uploaded, redriven and routed
exactly once; a letter that keeps failing gains attempts and is parked at the maximum."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.minio_store import storage_client
from pipeline.adapters.publisher import ArrivalPublisher
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import DeadLetter, ObjectRef, RoutedCall, decode
from pipeline.stack.minio import prepare_bucket
from tests import audio
from tests.kafka_helpers import consume
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(stack_settings: Settings, unique: str) -> Settings:
    cfg = stack_settings.model_copy(update={"recordings_bucket": f"rec-{unique}", "topic_prefix": f"t{unique}."})
    prepare_bucket(storage_client(cfg), cfg.recordings_bucket)
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    return cfg


def letters(settings: Settings, *args: str) -> list[dict]:
    result = callqa(settings, "dlq", "list", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_letters(settings: Settings, want: int, *args: str, timeout_s: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    found = letters(settings, *args)
    while len(found) < want and time.monotonic() < deadline:
        time.sleep(1)
        found = letters(settings, *args)
    return found


def routed(settings: Settings, key: str, settle_s: float) -> list[RoutedCall]:
    msgs = consume(settings, "audio.bucket.short", want=1, timeout_s=60, settle_s=settle_s,
                   keep=lambda m: decode(m.value(), RoutedCall).object.key == key)
    return [decode(m.value(), RoutedCall) for m in msgs]


def test_missing_object_redriven_after_upload_routes_exactly_once_and_a_still_failing_one_is_parked(
        settings: Settings, unique: str, tmp_path: Path) -> None:
    publisher = ArrivalPublisher(settings)
    for key in ("fixed.wav", "gone.wav"):
        publisher.publish(ObjectRef(bucket=settings.recordings_bucket, key=key))
    publisher.flush()
    router = spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}")
    try:
        open_letters = wait_letters(settings, 2)
        assert sorted((d["key"].rsplit("/", 1)[1], d["reason"], d["attempts"]) for d in open_letters) == [
            ("fixed.wav", "missing_object", 1), ("gone.wav", "missing_object", 1)]
        fixed = next(d for d in open_letters if d["key"].endswith("fixed.wav"))
        shown = callqa(settings, "dlq", "show", fixed["id"])
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["original_payload"]["object"]["key"] == "fixed.wav"

        data = audio.write(tmp_path / "fixed.wav", 3.0, 8000).read_bytes()
        storage_client(settings).put_object(settings.recordings_bucket, "fixed.wav", io.BytesIO(data), len(data))
        result = callqa(settings, "dlq", "redrive", "--key", "*fixed.wav", "--execute")
        assert result.returncode == 0, result.stderr
        assert "redriven 1, parked 0" in result.stdout
        assert len(routed(settings, "fixed.wav", settle_s=8)) == 1
        # Dealt with: the same selection again redrives nothing, and it no longer lists as open.
        assert "redriven 0" in callqa(settings, "dlq", "redrive", "--key", "*fixed.wav", "--execute").stdout
        assert len(routed(settings, "fixed.wav", settle_s=8)) == 1
        assert [d["key"].rsplit("/", 1)[1] for d in letters(settings)] == ["gone.wav"]

        # Still missing: each redrive fails again with one attempt more, then it is parked.
        for attempt in (2, 3):
            result = callqa(settings, "dlq", "redrive", "--reason", "missing_object", "--max-attempts", "3", "--execute")
            assert "redriven 1, parked 0" in result.stdout, result.stdout
            again = wait_letters(settings, 1)
            assert [(d["key"].rsplit("/", 1)[1], d["attempts"]) for d in again] == [("gone.wav", attempt)]
        result = callqa(settings, "dlq", "redrive", "--reason", "missing_object", "--max-attempts", "3", "--execute")
        assert "redriven 0, parked 1" in result.stdout, result.stdout
        parked = consume(settings, "dlq.parked", want=1, timeout_s=30, settle_s=3)
        assert [(decode(m.value(), DeadLetter).original_key.rsplit("/", 1)[1], decode(m.value(), DeadLetter).attempts)
                for m in parked] == [("gone.wav", 3)]
        assert letters(settings) == []
        time.sleep(5)
        assert len(letters(settings, "--all")) == 4  # 2 first failures + 2 failed redrives, none new
    finally:
        stop(router)
