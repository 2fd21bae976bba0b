"""The QA step shared by the Faust stage and the embedded runner: a result or a dead letter, never a crash."""

from __future__ import annotations

import pytest

from pipeline.events import ModelInfo, ObjectRef, Segment, SourcePosition, Transcript, encode
from pipeline.qa import QAEngine
from pipeline.stages.outcomes import Dead
from pipeline.stages.qa import Evaluated, QaStage

SOURCE = SourcePosition(topic="asr.transcripts", partition=2, offset=41)


@pytest.fixture(scope="module")
def stage() -> QaStage:
    return QaStage(QAEngine.from_paths([]))


def transcript(text: str) -> Transcript:
    return Transcript(
        call_id="c1",
        object=ObjectRef(bucket="b", key="c1.wav"),
        duration_s=10.0,
        channels=1,
        model=ModelInfo(name="m", version="1"),
        segments=[Segment(role="agent", channel=0, start_s=0.0, end_s=4.0, text=text)],
    )


def test_a_good_transcript_gives_a_result(stage: QaStage) -> None:
    out = stage.evaluate_payload(encode(transcript("This call is recorded.")), b"c1", SOURCE)
    assert isinstance(out, Evaluated) and out.result.call_id == "c1"


def test_an_engine_failure_is_dead_lettered_without_the_text(stage: QaStage, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(text: str):  # noqa: ANN202 - what normalize did on "十፩" (an Ethiopic digit)
        raise ValueError(f"invalid literal for int() with base 10: {text!r}")

    monkeypatch.setattr("pipeline.qa.context.normalize", failing)
    payload = encode(transcript("my card is 4532 0151 1283 0366"))
    out = stage.evaluate_payload(payload, b"c1", SOURCE)
    assert isinstance(out, Dead)
    letter = out.letter
    assert (letter.reason, letter.stage, letter.source, letter.original_key) == ("internal_error", "qa", SOURCE, "c1")
    assert letter.original_payload == payload
    assert "4532" not in letter.message  # the message is logged: no transcript text in it


@pytest.mark.parametrize("payload", [b"not json", b'{"schema_version": "1.0", "call_id": 5}', b"[1]"])
def test_a_malformed_transcript_is_dead_lettered(stage: QaStage, payload: bytes) -> None:
    out = stage.evaluate_payload(payload, b"k", SOURCE)
    assert isinstance(out, Dead) and out.letter.reason == "malformed_transcript"


def test_text_that_once_crashed_normalize_is_evaluated(stage: QaStage) -> None:
    out = stage.evaluate_payload(encode(transcript("十፩ 十፩")), b"c1", SOURCE)
    assert isinstance(out, Evaluated)
