"""A result's identity is never overwritten by a replay: each stage's replay id is added to the
input's lineage, so one result per (call_id, replay_id) holds for any chain of replays."""

from __future__ import annotations

import itertools

import orjson
import pytest

from pipeline.asr import CallTranscript
from pipeline.asr.transcript import Segment as AsrSegment
from pipeline.errors import ConfigError
from pipeline.events import ObjectRef, RoutedCall, Transcript, decode, encode
from pipeline.qa import QAEngine
from pipeline.stages.qa import Evaluated, QaStage
from pipeline.stages.transcript_event import to_transcript
from tests.samples import one_turn_transcript as transcript


@pytest.fixture(scope="module")
def stage() -> QaStage:
    return QaStage(QAEngine.from_paths([]))


def routed(replay_id: str | None) -> RoutedCall:
    return RoutedCall(
        call_id="c1",
        object=ObjectRef(bucket="b", key="c1.wav"),
        bucket="short",
        duration_s=10.0,
        sample_rate_hz=16000,
        channels=1,
        frames=160000,
        container="wav",
        codec="pcm_s16le",
        roles={"0": "agent"},
        replay_id=replay_id,
    )


def asr_result() -> CallTranscript:
    return CallTranscript(
        call_id="c1",
        segments=[AsrSegment(role="agent", channel=0, start_s=0.0, end_s=1.0, text="hello")],
        languages={0: "en"},
        model_name="m",
        model_version="1",
        timings={},
        duration_s=10.0,
    )


def result_key(stage: QaStage, t: Transcript, replay_id: str | None) -> tuple[str, str | None, float]:
    out = stage.evaluate_payload(encode(t), b"c1", None, replay_id)
    assert isinstance(out, Evaluated)
    return out.result.call_id, out.result.replay_id, out.result.score


def test_a_qa_replay_over_an_original_and_an_asr_replay_gives_two_keys(stage: QaStage) -> None:
    # The original transcript and an ASR replay's (another model: other words, another score).
    original = transcript("This call is recorded. Thank you for calling.", None)
    asr_replay = transcript("you are an idiot", "asr-r2")
    results = [result_key(stage, t, "qa-r3") for t in (original, asr_replay)]
    assert results[0][2] != results[1][2]  # the two results differ...
    assert results[0][:2] != results[1][:2]  # ...so they must not share a key
    assert [r[1] for r in results] == ["qa-r3", "asr-r2/qa-r3"]


def test_one_key_per_result_for_any_chain_of_replays(stage: QaStage) -> None:
    """Every combination of router generation, ASR replay and QA replay gives its own key."""
    keys = []
    for gen, asr, qa in itertools.product([None, "gen2"], [None, "asr-r2"], [None, "qa-r3"]):
        t = to_transcript(routed(gen), asr_result(), replay_id=asr)
        keys.append(result_key(stage, decode(encode(t), Transcript), qa)[:2])
    assert len(set(keys)) == len(keys) == 8
    assert ("c1", "gen2/asr-r2/qa-r3") in keys and ("c1", None) in keys


def test_the_lineage_is_also_a_list(stage: QaStage) -> None:
    t = to_transcript(routed("gen2"), asr_result(), replay_id="asr-r2")
    assert (t.replay_id, t.replay_lineage) == ("gen2/asr-r2", ["gen2", "asr-r2"])
    out = stage.evaluate(t, encode(t), b"c1", None, "qa-r3")
    assert isinstance(out, Evaluated)
    assert out.result.replay_lineage == ["gen2", "asr-r2", "qa-r3"]
    plain = stage.evaluate(transcript("hi", None), b"", b"c1", None, None)
    assert isinstance(plain, Evaluated) and (plain.result.replay_id, plain.result.replay_lineage) == (None, [])


def test_a_1_1_transcript_without_a_lineage_keeps_its_id(stage: QaStage) -> None:
    fields = transcript("hi", "asr-r2").model_dump(mode="json", exclude={"replay_lineage"})
    old = orjson.dumps({**fields, "schema_version": "1.1"})
    out = stage.evaluate_payload(old, b"c1", None, "qa-r3")
    assert isinstance(out, Evaluated) and out.result.replay_lineage == ["asr-r2", "qa-r3"]


def test_a_worker_in_another_group_always_tags_its_transcripts() -> None:
    from pipeline.config import Settings
    from pipeline.lineage import check_replay_id
    from pipeline.run.worker import AsrWorker, WorkerOptions

    cfg = Settings(topic_prefix="p.")
    assert WorkerOptions(bucket="short").replay_tag(cfg) is None  # the live group
    assert WorkerOptions(bucket="short", group="p.asr-short").replay_tag(cfg) is None
    assert WorkerOptions(bucket="short", group="asr-short-r2").replay_tag(cfg) == "asr-short-r2"
    assert WorkerOptions(bucket="short", group="asr-short-r2", replay_id="r2").replay_tag(cfg) == "r2"
    worker = AsrWorker(cfg, WorkerOptions(bucket="short", group="asr-short-r2"), engine=None, store=object())  # type: ignore[arg-type]
    assert worker.stage.replay_id == "asr-short-r2"
    with pytest.raises(ConfigError):
        check_replay_id("a/b")
