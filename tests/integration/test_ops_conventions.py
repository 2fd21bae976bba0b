"""Operator commands on real Kafka, Kafka's way: dry run unless --execute, per-command
--bootstrap-server/--command-config, `replay reset` targets and offsets files, `topics apply`'s
diff, and `lag`'s exit status by verdict."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline.adapters.kafka_admin import apply_catalog, plan_catalog
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import DeadLetter, SourcePosition, encode
from pipeline.runtime.lag_kafka import OffsetsReader
from tests.kafka_helpers import commit, consume, produce
from tests.processes import callqa

pytestmark = pytest.mark.integration
UNREACHABLE = "127.0.0.1:1"  # what the settings say in tests that give --bootstrap-server


@pytest.fixture
def private(isolated_settings: Settings) -> Settings:
    """Every topic under a private prefix, arrivals too: no other test's records in any stage's input."""
    apply_catalog(isolated_settings, load_catalog(isolated_settings.bucket_names))
    return isolated_settings


def committed(settings: Settings, group: str, topic: str) -> dict[tuple[str, int], int | None]:
    reader = OffsetsReader(settings)
    try:
        return reader.committed(group, [(topic, p) for p in reader.partitions(topic)])
    finally:
        reader.close()


def watermarks(settings: Settings, topic: str) -> dict[tuple[str, int], tuple[int, int]]:
    reader = OffsetsReader(settings)
    try:
        return reader.watermarks([(topic, p) for p in reader.partitions(topic)])
    finally:
        reader.close()


def test_topics_apply_prints_the_diff_and_changes_only_with_execute(isolated_settings: Settings,
                                                                    tmp_path: Path) -> None:
    cfg = isolated_settings
    specs = load_catalog(cfg.bucket_names)
    dry = callqa(cfg, "topics", "apply")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"{cfg.topic('asr.transcripts')}: create (" in dry.stdout and "add --execute" in dry.stdout
    assert len(plan_catalog(cfg, specs)) == len(specs)  # nothing was created

    transcripts = next(s for s in specs if s.name == "asr.transcripts")
    key, value = "retention.ms", transcripts.config["retention.ms"]
    narrow = [s if s is not transcripts else type(s)(**{**s.__dict__, "partitions": 2,
                                                        "config": {**s.config, key: "12345"}}) for s in specs]
    apply_catalog(cfg, narrow)
    # the settings point nowhere: --command-config (with a comment and a secret) reaches the cluster
    props = tmp_path / "admin.properties"
    props.write_text(f"# ops client\nbootstrap.servers={cfg.kafka_bootstrap}\nclient.id=callqa-ops\n"
                     "sasl.password=hunter2-not-printed\n")
    dry = callqa(cfg, "topics", "apply", "--dry-run", "--command-config", str(props), kafka_bootstrap=UNREACHABLE)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    name = cfg.topic("asr.transcripts")
    assert dry.stdout.splitlines()[:2] == [f"{name}: partitions 2 -> {transcripts.partitions}",
                                           f"{name}: config {key} 12345 -> {value}"], dry.stdout
    assert "hunter2" not in dry.stdout + dry.stderr
    assert len(plan_catalog(cfg, specs)) == 2  # the dry run changed nothing

    done = callqa(cfg, "topics", "apply", "--execute", "--bootstrap-server", cfg.kafka_bootstrap,
                  kafka_bootstrap=UNREACHABLE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{name}: partitions 2 -> {transcripts.partitions} [applied]" in done.stdout
    assert plan_catalog(cfg, specs) == []
    assert "no changes" in callqa(cfg, "topics", "apply").stdout

    props.write_text("security.protocol=PLAINTEXT\nhunter2-on-a-line-of-its-own\n")
    bad = callqa(cfg, "topics", "describe", "--command-config", str(props))
    assert bad.returncode == 2 and "line 2" in bad.stderr and "hunter2" not in bad.stdout + bad.stderr


def test_dlq_redrive_is_a_dry_run_unless_execute(private: Settings, unique: str) -> None:
    cfg = private
    arrivals = cfg.arrivals
    letter = DeadLetter.of(payload=b'{"redriven": true}', key=f"k-{unique}".encode(), reason="missing_object",
                           message="not there", stage="router", source=SourcePosition(topic=arrivals, partition=0, offset=0))
    produce(cfg, "router.dlq", [(f"k-{unique}".encode(), encode(letter))])
    for args in ([], ["--dry-run"]):
        dry = callqa(cfg, "dlq", "redrive", "--key", f"k-{unique}", "--since", "2000-01-01T00:00+08:00", *args)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "dry run: would redrive 1" in dry.stdout and "--execute" in dry.stdout
    assert consume(cfg, "router.retry", want=1, timeout_s=5) == []  # a redrive goes to the router's retry topic
    listed = json.loads(callqa(cfg, "dlq", "list", "--json").stdout)
    assert [d["state"] for d in listed] == ["open"]
    assert datetime.fromisoformat(listed[0]["failed_at"]).utcoffset() == datetime.now().astimezone().utcoffset()
    both = callqa(cfg, "dlq", "redrive", "--key", f"k-{unique}", "--dry-run", "--execute")
    assert both.returncode == 2 and "not both" in both.stderr

    done = callqa(cfg, "dlq", "redrive", "--key", f"k-{unique}", "--execute")
    assert done.returncode == 0 and "redriven 1, parked 0" in done.stdout, done.stdout + done.stderr
    assert [m.value() for m in consume(cfg, "router.retry", want=1, timeout_s=30)] == [b'{"redriven": true}']
    assert json.loads(callqa(cfg, "dlq", "list", "--json").stdout) == []


def test_replay_reset_targets_export_and_restore(private: Settings, unique: str, tmp_path: Path) -> None:
    cfg = private
    topic, group = cfg.topic("audio.bucket.short"), f"g-{unique}"
    produce(cfg, "audio.bucket.short", [(f"k{i}".encode(), b"{}") for i in range(30)])
    ends = {tp: hi for tp, (_, hi) in watermarks(cfg, topic).items()}
    original = {tp: hi // 2 for tp, hi in ends.items()}
    commit(cfg, group, original)
    reset = ("replay", "reset", "--group", group, "--bucket", "short")
    saved = tmp_path / "before.csv"

    dry = callqa(cfg, *reset, "--to-earliest", "--export", str(saved))
    assert dry.returncode == 0 and "dry run" in dry.stdout, dry.stdout + dry.stderr
    assert committed(cfg, group, topic) == original
    assert saved.read_text() == "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(original.items()))

    assert callqa(cfg, *reset, "--to-earliest", "--execute").returncode == 0
    assert committed(cfg, group, topic) == {tp: 0 for tp in ends}
    restored = callqa(cfg, *reset, "--from-file", str(saved), "--execute")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert committed(cfg, group, topic) == original
    assert callqa(cfg, "replay", "reset", "--group", group, "--from-file", str(saved), "--execute").returncode == 0

    shifted = callqa(cfg, *reset, "--shift-by", "-1", "--execute", "--bootstrap-server", cfg.kafka_bootstrap,
                     kafka_bootstrap=UNREACHABLE)
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert committed(cfg, group, topic) == {tp: max(0, o - 1) for tp, o in original.items()}
    assert callqa(cfg, *reset, "--to-latest", "--execute").returncode == 0
    assert committed(cfg, group, topic) == ends
    assert callqa(cfg, *reset, "--shift-by", "100", "--execute").returncode == 0  # clamped to the end
    assert committed(cfg, group, topic) == ends
    two = callqa(cfg, *reset, "--to-latest", "--to-earliest")
    assert two.returncode == 2 and "give one of" in two.stderr

    fresh = f"r-{unique}"
    made = callqa(cfg, "replay", "group", "--group", fresh, "--bucket", "short", "--offset", "0")
    assert made.returncode == 0 and "dry run" in made.stdout, made.stdout + made.stderr
    assert set(committed(cfg, fresh, topic).values()) == {None}
    made = callqa(cfg, "replay", "group", "--group", fresh, "--bucket", "short", "--offset", "0", "--execute")
    assert made.returncode == 0 and f"--group {fresh}" in made.stdout, made.stdout + made.stderr
    assert committed(cfg, fresh, topic) == {tp: 0 for tp in ends}


def lag_code(settings: Settings, group: str, *args: str) -> tuple[int, dict]:
    result = callqa(settings, "lag", "--json", "--sample-s", "0", "--qa-group", group, *args)
    assert result.stdout, result.stderr
    data = json.loads(result.stdout)
    return result.returncode, next(s for s in data["stages"] if s["stage"] == "qa")


def test_lag_exits_by_verdict(private: Settings, unique: str) -> None:
    cfg = private
    topic, group = cfg.topic("asr.transcripts"), f"qa-{unique}"
    produce(cfg, "asr.transcripts", [(f"c{i}".encode(), b"{}") for i in range(600)])
    ends = {tp: hi for tp, (_, hi) in watermarks(cfg, topic).items()}
    commit(cfg, group, {tp: 0 for tp in ends})
    code, qa = lag_code(cfg, group)  # behind, one sample: nothing measured yet
    assert (code, qa["status"]) == (3, "no rate yet")

    time.sleep(2.5)
    commit(cfg, group, {tp: min(2, hi) for tp, hi in ends.items()})  # a few consumed: a slow, real rate
    soon = (datetime.now(UTC) + timedelta(seconds=20)).isoformat(timespec="seconds")
    code, qa = lag_code(cfg, group, "--window-end", soon)
    assert (code, qa["status"]) == (1, "at risk"), qa
    tomorrow = (datetime.now(UTC) + timedelta(hours=23)).strftime("%H:%M") + "+00:00"
    code, qa = lag_code(cfg, group, "--window-end", tomorrow)
    assert (code, qa["status"]) == (0, "on track"), qa

    commit(cfg, group, ends)
    code, qa = lag_code(cfg, group, "--window-end", "06:00 Asia/Shanghai")
    assert (code, qa["status"]) == (0, "done")
    unknown = callqa(cfg, "lag", "--json", "--sample-s", "0", "--qa-group", group, "--group", f"nobody-{unique}")
    assert unknown.returncode == 3 and "no committed offsets" in unknown.stderr  # cannot tell: unknown
