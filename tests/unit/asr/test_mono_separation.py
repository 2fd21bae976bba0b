"""A mono call through the real engine with speaker separation: the agent's abuse is the agent's."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from pipeline.asr import CallAudio, Engine
from pipeline.qa.engine import QAEngine
from pipeline.qa.rules import agent_phrases, load_packs
from tools.eval_speakers import RATE, Script, qa_text, render

TURNS = (
    ("agent", "Thank you for calling Northwind Bank, my name is Anna. This call is recorded for quality purposes."),
    ("customer", "Sorry, I did not understand, can you say that again?"),
    ("agent", "You are an idiot, stop wasting my time."),
    ("customer", "Okay, thank you."),
)


def test_abusive_agent_on_a_mono_mix_is_reported_as_abuse_agent_with_a_role_confidence(engine: Any) -> None:
    pack = load_packs([])
    separating = Engine(
        replace(engine.opts, agent_phrases=agent_phrases(pack)),
        engine.model,
        engine.tokenizer,
        engine.device,
        engine.model_name,
        engine.model_version,
    )
    # the customer's voice slowed and pitch-shifted, 6 dB quieter; both summed to one channel
    channels, _ = render(
        Script("mono-abuse", TURNS, True, False),
        ("en-us+f2", "en-us+m3", ("pitch", "-300", "tempo", "0.85"), -6.0),
        random.Random(0),
    )
    result = separating.transcribe(CallAudio("mono-abuse", channels.sum(axis=0, keepdims=True), RATE, ("mixed",)))
    roles = [s.role for s in result.segments]
    assert "agent" in roles and "customer" in roles and "mixed" not in roles
    findings = QAEngine(pack).evaluate(qa_text("mono-abuse", result, 1)).findings
    abuse = [f for f in findings if f.rule_id == "abuse.agent"]
    assert len(abuse) == 1 and abuse[0].role == "agent"
    assert abuse[0].confidence is not None and 0.5 <= abuse[0].confidence <= 1.0
    assert "abuse.customer" not in {f.rule_id for f in findings}
