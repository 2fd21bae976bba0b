"""The engine's digit-biased second decode of number regions, on real speech (espeak-ng, 8 kHz)."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

import numpy as np
import pytest
import soxr

from pipeline.asr import CallAudio, Engine
from pipeline.asr.number_pass import NumberPass
from tests.unit.asr.speech import speak

pytestmark = pytest.mark.model

WORDS = "zero one two three four five six seven eight nine".split()


def stereo_call(customer_text: str, agent_text: str) -> CallAudio:
    """Agent left, customer right, the customer speaking after the agent; 8 kHz like a phone line."""
    agent = soxr.resample(speak(agent_text, voice="en-us+f2"), 16_000, 8_000)
    customer = soxr.resample(speak(customer_text, voice="en-us+f4"), 16_000, 8_000)
    n = len(agent) + len(customer) + 16_000
    samples = np.zeros((2, n), dtype=np.float32)
    samples[0, 4_000 : 4_000 + len(agent)] = agent
    samples[1, 8_000 + len(agent) : 8_000 + len(agent) + len(customer)] = customer
    return CallAudio("numbers", samples, 8_000, ("agent", "customer"))


def similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def test_a_card_read_digit_by_digit_comes_out_as_digits_and_other_speech_is_untouched(engine: Engine) -> None:
    card = "4293544171166346"
    call = stereo_call("My card number is " + ", ".join(WORDS[int(d)] for d in card) + ".",
                       "Thank you, can you read me the number on your card?")
    plain = engine.transcribe(call)
    engine.numbers = NumberPass(engine, ("en",))
    try:
        second = engine.transcribe(call)
    finally:
        engine.numbers = None
    digits = "".join(re.findall(r"\d", second.text_of("customer")))
    before = "".join(re.findall(r"\d", plain.text_of("customer")))
    # one numeral per spoken digit: the 16 digits in order, one or two misheard at most
    assert len(digits) == 16 and similarity(digits, card) >= 0.85, second.text_of("customer")
    assert similarity(digits, card) >= similarity(before, card), (plain.text_of("customer"), digits)
    assert second.text_of("agent") == plain.text_of("agent")
    assert engine.numbers is None
