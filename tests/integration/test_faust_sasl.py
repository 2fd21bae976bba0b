"""The Faust stages over SASL: a stack whose broker has a second listener, SASL_PLAINTEXT with SCRAM,
and the router and QA stage reaching it only through CALLQA_KAFKA_CONFIG (as the confluent clients do)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from pipeline import stack
from pipeline.adapters.minio_store import storage_client
from pipeline.config import Settings, read_env_file
from pipeline.events import ModelInfo, ObjectRef, QAResult, RoutedCall, Segment, Transcript, decode, encode
from pipeline.stack.kafka import ScramUser
from tests import audio
from tests.kafka_helpers import TopicReader, produce
from tests.processes import callqa, spawn, stop

pytestmark = pytest.mark.integration
USER = ScramUser("callqa-stage", "scram-test-secret", "SCRAM-SHA-512")
BUCKET_TOPICS = [f"audio.bucket.{b}" for b in ("short", "medium", "long", "xlong")]


@pytest.fixture(scope="module")
def sasl_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A stack of this module's own (the shared one keeps its single listener), reached over SASL."""
    state_dir = tmp_path_factory.mktemp("sasl-stack")
    base = Settings(state_dir=state_dir)
    state = stack.up(base, scram_user=USER)
    try:
        assert state.sasl_port and stack.status(base)["kafka"]["sasl_mechanism"] == "SCRAM-SHA-512"
        conn = read_env_file(state_dir / "stack.env")
        yield Settings(
            state_dir=state_dir,
            **{**conn, "kafka_bootstrap": f"127.0.0.1:{state.sasl_port}"},
            kafka_config=USER.client_config(),
        )
    finally:
        stack.down(base)


def reaches(bootstrap: str, config: dict[str, str]) -> bool:
    try:
        return bool(AdminClient({"bootstrap.servers": bootstrap, **config}).list_topics(timeout=4).topics)
    except KafkaException:
        return False


def test_the_sasl_listener_takes_only_the_scram_user(sasl_settings: Settings) -> None:
    bootstrap = sasl_settings.kafka_bootstrap
    assert reaches(bootstrap, USER.client_config())
    assert not reaches(bootstrap, {})  # no credentials: no metadata
    assert not reaches(bootstrap, {**USER.client_config(), "sasl.password": "wrong"})


def test_router_and_qa_stage_work_over_sasl(sasl_settings: Settings, tmp_path: Path) -> None:
    settings = sasl_settings
    # one CALLQA_KAFKA_CONFIG for every stage: the workers' tuning beside the credentials
    tuning = {"linger.ms": "5", "fetch.max.bytes": "52428800", "socket.keepalive.enable": "true", "client.id": "cq"}
    config = json.dumps({**USER.client_config(), **tuning})
    data = audio.write(tmp_path / "s.wav", 3.0, 8000).read_bytes()
    storage_client(settings).put_object(settings.recordings_bucket, "sasl-call.wav", io.BytesIO(data), len(data))
    t = Transcript(
        call_id="sasl-1",
        object=ObjectRef(bucket=settings.recordings_bucket, key="sasl-1.wav"),
        agent_id="a-1",
        duration_s=12.0,
        channels=2,
        languages={"0": "en", "1": "en"},
        model=ModelInfo(name="whisper-base", version="t"),
        segments=[
            Segment(
                role="agent",
                channel=0,
                start_s=0.5,
                end_s=5.0,
                text="Hello, this call is recorded for quality purposes.",
            ),
            Segment(role="customer", channel=1, start_s=6.0, end_s=9.0, text="I want to check my balance."),
        ],
    )
    produce(settings, "asr.transcripts", [(t.call_id.encode(), encode(t))])
    reader = TopicReader(settings, [*BUCKET_TOPICS, "qa.findings"])
    procs = [
        spawn(settings, tmp_path / "router.log", "router", "--app-id", "sasl-router", kafka_config=config),
        spawn(settings, tmp_path / "qa.log", "qa", "--app-id", "sasl-qa", kafka_config=config),
    ]
    try:

        def done(msgs: list) -> int:
            topics = {m.topic() for m in msgs}
            return int("qa.findings" in topics) + int(bool(topics & set(BUCKET_TOPICS)))

        reader.wait_for(done, 2, timeout_s=120, settle_s=2)
    finally:
        for proc in procs:
            stop(proc)
        reader.close()
    routed = [decode(m.value(), RoutedCall) for m in reader.messages if m.topic() in BUCKET_TOPICS]
    results = [decode(m.value(), QAResult) for m in reader.messages if m.topic() == "qa.findings"]
    logs = "\n".join((tmp_path / f"{n}.log").read_text()[-3000:] for n in ("router", "qa"))
    assert [c.call_id for c in routed] == ["sasl-call"], logs
    assert [r.call_id for r in results] == ["sasl-1"], logs
    for name in ("router", "qa"):
        ignored = [
            json.loads(line)
            for line in (tmp_path / f"{name}.log").read_text().splitlines()
            if '"kafka_config_ignored"' in line
        ]
        assert [entry["keys"] for entry in ignored] == [sorted(tuning)], (name, logs)


def test_a_security_setting_the_faust_stages_cannot_honour_stops_them_at_start(sasl_settings: Settings) -> None:
    config = json.dumps({**USER.client_config(), "sasl.mechanism": "GSSAPI", "linger.ms": "5"})
    for command in ("router", "qa"):
        result = callqa(sasl_settings, command, kafka_config=config)
        assert result.returncode == 2, (command, result.stdout[-2000:], result.stderr[-2000:])
        assert "SASL mechanism GSSAPI is not supported by the Faust stages" in result.stderr
