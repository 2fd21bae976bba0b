"""An object re-put between routing and fetch (issue 26 item 11), on an unversioned bucket.

Without versions, the worker reads the object by key; a recorder that writes the same key
again after the router probed it would have its new audio transcribed under the routed
identity (the old etag). The worker's read is conditional on the routed etag: the old
routed call is dead-lettered ``object_changed``, and the new content is transcribed once,
under its own identity, from its own arrival.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from minio import Minio
from minio.notificationconfig import NotificationConfig, QueueConfig

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.minio_store import storage_client
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.events import DeadLetter, RoutedCall, decode
from pipeline.stack.minio import NOTIFY_ARN
from tests.integration.test_pipeline import LINES, similar, transcripts, write_call
from tests.kafka_helpers import TopicReader
from tests.processes import spawn, stop

pytestmark = pytest.mark.integration


@pytest.fixture
def unversioned(stack_settings: Settings, unique: str) -> Settings:
    """A private recordings bucket without versioning (MinIO publishes its puts) and topics."""
    cfg = stack_settings.model_copy(
        update={
            "recordings_bucket": f"plain-{unique}",
            "topic_prefix": f"t{unique}.",
            "arrivals_topic": stack_settings.topic("audio.arrivals"),
        }
    )
    client = storage_client(cfg)
    client.make_bucket(cfg.recordings_bucket)
    client.set_bucket_notification(
        cfg.recordings_bucket,
        NotificationConfig(queue_config_list=[QueueConfig(queue=NOTIFY_ARN, events=["s3:ObjectCreated:*"])]),
    )
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    return cfg


def same_shape(path: Path, frames: int) -> bytes:
    """The call's WAV cut or padded to ``frames``: a re-put the routed header cannot tell apart."""
    data, rate = sf.read(path, dtype="int16", always_2d=True)
    out = data[:frames] if len(data) >= frames else np.pad(data, ((0, frames - len(data)), (0, 0)))
    buf = io.BytesIO()
    sf.write(buf, out, rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def put(client: Minio, bucket: str, key: str, data: bytes) -> str:
    return client.put_object(bucket, key, io.BytesIO(data), len(data), content_type="audio/wav").etag.strip('"')


def routed(reader: TopicReader) -> list[RoutedCall]:
    return [decode(m.value(), RoutedCall) for m in reader.messages if ".audio.bucket." in m.topic()]


def test_a_re_put_after_routing_is_dead_lettered_not_transcribed_under_the_old_identity(
    unversioned: Settings, unique: str, tmp_path: Path
) -> None:
    settings = unversioned
    first = write_call(tmp_path / "first", "pcm16k", *LINES[0])
    frames = sf.info(first).frames
    second = same_shape(write_call(tmp_path / "second", "pcm16k", *LINES[3]), frames)
    client = storage_client(settings)
    reader = TopicReader(settings, ["audio.bucket.short", "asr.transcripts", "asr.dlq", "router.dlq"])
    procs = []
    try:
        procs.append(spawn(settings, tmp_path / "router.log", "router", "--app-id", f"router-{unique}"))
        old_etag = put(client, settings.recordings_bucket, "rec/changed.wav", first.read_bytes())
        reader.wait_for(lambda _: len(routed(reader)), 1, 180, settle_s=0)
        assert routed(reader)[0].object.etag == old_etag and routed(reader)[0].object.version_id is None
        new_etag = put(client, settings.recordings_bucket, "rec/changed.wav", second)  # the same key again
        assert new_etag != old_etag
        reader.wait_for(lambda _: len(routed(reader)), 2, 180, settle_s=0)  # the re-put's own arrival
        assert [c.object.etag for c in routed(reader)] == [old_etag, new_etag]

        # Only now does the worker fetch: the first routed call's object is no longer what was routed.
        procs.append(
            spawn(
                settings,
                tmp_path / "worker.log",
                "worker",
                "--bucket",
                "short",
                "--device",
                "cpu",
                "--instance-id",
                f"w-{unique}",
                asr_threads="1",
            )
        )
        # then 10 s more: anything more would be a duplicate
        reader.wait_for(lambda _: len(transcripts(reader)) + len(letters(reader)), 2, 600, settle_s=10)

        got = transcripts(reader)
        assert [(t.object.etag, similar(" ".join(LINES[3]), text(t))) for t in got] == [(new_etag, True)], [
            (t.object.etag, text(t)) for t in got
        ]
        dead = letters(reader)
        assert [(d.stage, d.reason) for d in dead] == [("asr", "object_changed")], [d.message for d in dead]
        assert old_etag in dead[0].message
        assert decode(dead[0].original_payload, RoutedCall).object.etag == old_etag
    finally:
        for proc in procs:
            stop(proc)
        reader.close()


def letters(reader: TopicReader) -> list[DeadLetter]:
    return [decode(m.value(), DeadLetter) for m in reader.messages if m.topic().endswith(".dlq")]


def text(transcript) -> str:  # noqa: ANN001 - a Transcript
    return " ".join(s.text for s in sorted(transcript.segments, key=lambda s: s.start_s))
