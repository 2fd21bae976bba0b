"""`stack up` formats Kafka storage whatever cluster id it draws (issue 26 item 13).

A URL-safe base64 id starts with '-' one time in 64, and ``-t -x...`` made the storage tool read the id
as an option (``argument --cluster-id/-t: expected one argument``).
"""

from __future__ import annotations

import base64
import string
import uuid
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.stack import kafka

B64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def _uuid_with_first_char(char: str) -> uuid.UUID:
    """A UUID whose URL-safe base64 form starts with ``char`` (the top 6 bits of its first byte)."""
    return uuid.UUID(bytes=bytes([B64URL.index(char) << 2]) + uuid.uuid4().bytes[1:])


def _decodes_to_16_bytes(cluster_id: str) -> bool:
    return len(cluster_id) == 22 and len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


@pytest.mark.parametrize("first", list(B64URL))
def test_no_draw_gives_an_id_that_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    drawn = _uuid_with_first_char(first)
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: drawn)
    cluster_id = kafka.new_cluster_id()
    assert not cluster_id.startswith("-") and _decodes_to_16_bytes(cluster_id)


def test_many_random_ids_are_valid_and_distinct() -> None:
    ids = [kafka.new_cluster_id() for _ in range(20_000)]  # ~312 would start with '-' before
    assert len(set(ids)) == len(ids)
    assert all(_decodes_to_16_bytes(i) and not i.startswith("-") for i in ids)


@pytest.mark.parametrize("first", list(B64URL))
def test_the_command_line_glues_the_id_to_its_option(first: str) -> None:
    cluster_id = first + "A" * 21
    command = kafka.format_command(["java"], Path("/s/server.properties"), cluster_id)
    assert f"--cluster-id={cluster_id}" in command
    assert "-t" not in command and cluster_id not in command  # never a separate argument


def test_the_storage_tool_formats_an_id_that_starts_with_a_dash(tmp_path: Path) -> None:
    """The real Kafka storage tool, on a fresh directory, with an id such as Kafka itself never draws."""
    libs = kafka.ensure_jars(Settings().cache_dir)
    home = tmp_path / "kafka"
    props = kafka.write_config(home, port=1, controller_port=2)
    cluster_id = "-" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")[1:]
    kafka.format_storage(kafka.java_command(libs, home), props, cluster_id)
    meta = (home / "data" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}\n" in meta
