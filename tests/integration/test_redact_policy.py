"""The redaction stage's MinIO policy (deploy/minio/callqa-redact-policy.json) on the real server.

The policy is filled in as deploy/compose.yaml's minio-setup fills it and attached to a new user;
the redaction step (pipeline/run/redact_step.py) running as that user writes and verifies a copy under
the prefix and names it on audio.redacted, while a write outside the prefix, outside the copies'
bucket or into the recordings bucket is refused (a redact.dlq letter, or AccessDenied).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from minio.credentials import StaticProvider
from minio.error import S3Error
from minio.minioadmin import MinioAdmin
from pydantic import SecretStr

from pipeline.adapters.minio_store import retrying_store, storage_client
from pipeline.config import Settings
from pipeline.events import (
    AudioRedacted,
    ObjectRef,
    PIISpan,
    SourcePosition,
    decode,
    encode,
)
from pipeline.run.redact import check_target
from pipeline.run.redact_step import Redactor, TranscriptRedaction
from pipeline.stack.minio import prepare_bucket, prepare_copies_bucket
from pipeline.stages.outputs import Received, Writer
from pipeline.stages.redacted_copies import Target
from tests.samples import pii_transcript

pytestmark = pytest.mark.integration

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "minio" / "callqa-redact-policy.json"
PREFIX = "site-a/"
SOURCE = SourcePosition(topic="asr.transcripts", partition=0, offset=0)
CARD = PIISpan(type="bank_card", role="customer", start_s=0.5, end_s=1.2)


def filled(recordings: str, copies: str, prefix: str) -> dict:
    """The policy as minio-setup writes it (the same three substitutions, in the same order)."""
    text = POLICY.read_text().replace("RECORDINGS_BUCKET", recordings).replace("REDACT_BUCKET", copies)
    return json.loads(text.replace("REDACT_PREFIX", prefix))


@pytest.fixture
def users(stack_settings: Settings, unique: str) -> tuple[Settings, Settings]:
    """Buckets of this test, and a MinIO user with the filled-in policy: the root's settings and its."""
    root = stack_settings.model_copy(
        update={"recordings_bucket": f"rec-{unique}", "redact_bucket": f"red-{unique}", "redact_prefix": PREFIX}
    )
    client = storage_client(root)
    prepare_bucket(client, root.recordings_bucket)
    prepare_copies_bucket(client, root.redact_bucket)
    admin = MinioAdmin(
        endpoint=root.s3_endpoint,
        credentials=StaticProvider(root.s3_access_key, root.s3_secret_key.get_secret_value()),
        secure=root.s3_secure,
    )
    name, user, secret = f"callqa-redact-{unique}", f"redact-{unique}", f"secret-{unique}-x"
    admin.policy_add(name, policy=filled(root.recordings_bucket, root.redact_bucket, PREFIX))
    admin.user_add(user, secret)
    admin.attach_policy([name], user=user)
    return root, root.model_copy(update={"s3_access_key": user, "s3_secret_key": SecretStr(secret)})


def recording(root: Settings, key: str) -> ObjectRef:
    """A stereo PCM call in the recordings bucket (put with the root user, as a recorder would)."""
    buf = io.BytesIO()
    tone = (3000 * np.sin(np.linspace(0, 4000, 16000))).astype(np.int16)
    sf.write(buf, np.stack([tone, tone], axis=1), 8000, subtype="PCM_16", format="WAV")
    put = storage_client(root).put_object(root.recordings_bucket, key, io.BytesIO(buf.getvalue()), len(buf.getvalue()))
    return ObjectRef(bucket=root.recordings_bucket, key=key, version_id=put.version_id, etag=put.etag)


def step(cfg: Settings, target: Target) -> TranscriptRedaction:
    redactor = Redactor(retrying_store(cfg), target, "silence", 1 << 30)
    return TranscriptRedaction(redactor, Writer(group="callqa-redact"), "redact.retry")


def test_the_redaction_user_writes_its_copies_and_nothing_else(users: tuple[Settings, Settings]) -> None:
    root, cfg = users
    check_target(cfg)  # the copies' bucket is found with this user's rights
    ref = recording(root, "2026/12/03/call-1.wav")

    (record,) = step(cfg, Target(cfg.redact_bucket, PREFIX)).handle(
        Received(encode(pii_transcript(ref, [CARD], call_id=ref.key)), b"c1", SOURCE)
    )
    assert record.topic == "audio.redacted", record.letter
    event = decode(record.value, AudioRedacted)
    assert event.key == f"{PREFIX}{cfg.recordings_bucket}/2026/12/03/call-1.wav"
    assert storage_client(cfg).stat_object(cfg.redact_bucket, event.key).size == event.size_bytes

    (record,) = step(cfg, Target(cfg.redact_bucket, "elsewhere/")).handle(
        Received(encode(pii_transcript(ref, [CARD], call_id=ref.key)), b"c1", SOURCE)
    )
    assert record.topic == "redact.dlq" and record.letter is not None
    assert record.letter.reason == "write_failed" and "AccessDenied" in record.letter.message

    client = storage_client(cfg)
    for bucket, key in ((cfg.recordings_bucket, "overwrite.wav"), (cfg.redact_bucket, "top-level.wav")):
        with pytest.raises(S3Error) as denied:
            client.put_object(bucket, key, io.BytesIO(b"x"), 1)
        assert denied.value.code == "AccessDenied", (bucket, key)
    with pytest.raises(S3Error) as denied:
        client.remove_object(cfg.recordings_bucket, ref.key)
    assert denied.value.code == "AccessDenied"
