"""Rules on a mono call whose speakers were separated: roles judged, with the role confidence."""

from __future__ import annotations

from pipeline.numbers.model import SegmentText
from pipeline.qa.engine import QAEngine
from pipeline.qa.rules import load_packs

from .helpers import VISA_CARD, call, spoken_en

ENGINE = QAEngine(load_packs([]))


def mono(role: str, start: float, end: float, text: str, confidence: float | None) -> SegmentText:
    return SegmentText(role, 0, start, end, text, confidence)


def test_abusive_agent_on_a_separated_mono_call_is_reported_with_the_role_confidence() -> None:
    result = ENGINE.evaluate(
        call(
            mono("agent", 0.5, 4.0, "Thank you for calling, my name is Anna. This call is recorded.", 0.9),
            mono("customer", 4.5, 7.0, "Sorry, can you say that again?", 0.9),
            mono("agent", 7.5, 10.0, "You are an idiot, stop wasting my time.", 0.8),
            channels=1,
        )
    )
    abuse = [f for f in result.findings if f.rule_id == "abuse.agent"]
    assert len(abuse) == 1 and abuse[0].role == "agent" and abuse[0].confidence == 0.8
    assert not [f for f in result.findings if f.rule_id == "abuse.customer"]


def test_a_rude_customer_on_a_separated_mono_call_is_not_the_agent() -> None:
    result = ENGINE.evaluate(
        call(
            mono("agent", 0.5, 4.0, "Thank you for calling, my name is Anna. This call is recorded.", 0.9),
            mono("customer", 4.5, 7.0, "You are an idiot.", 0.9),
            channels=1,
        )
    )
    assert {f.rule_id for f in result.findings} >= {"abuse.customer"}
    assert "abuse.agent" not in {f.rule_id for f in result.findings}


def test_segments_left_mixed_are_skipped_by_agent_rules_that_skip_unknown_speakers() -> None:
    result = ENGINE.evaluate(
        call(
            mono("agent", 0.5, 4.0, "Thank you for calling, my name is Anna. This call is recorded.", 0.9),
            mono("mixed", 4.5, 7.0, "You are an idiot.", None),
            channels=1,
        )
    )
    assert "abuse.agent" not in {f.rule_id for f in result.findings}


def test_an_agent_reading_a_card_back_on_a_separated_mono_call_is_a_read_back() -> None:
    result = ENGINE.evaluate(
        call(
            mono("agent", 0.5, 4.0, "Thank you for calling, my name is Anna. This call is recorded.", 1.0),
            mono("customer", 4.5, 12.0, f"My card is {spoken_en(VISA_CARD)}", 0.95),
            mono("agent", 12.5, 20.0, f"Your card number is {spoken_en(VISA_CARD)}", 0.7),
            channels=1,
        )
    )
    read_back = [f for f in result.findings if f.rule_id == "pii.agent_reads_back"]
    assert len(read_back) == 1 and read_back[0].start_s >= 12.5 and read_back[0].confidence == 0.7
    assert "spoken by the agent" in read_back[0].message
