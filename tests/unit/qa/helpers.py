"""Hand-written transcripts for the QA tests."""

from __future__ import annotations

from pipeline.numbers.model import SegmentText
from pipeline.qa.model import CallText
from pipeline.qa.rules import RulePack, parse_pack

VALID_CARD = "6222021001123456789"  # Luhn-valid, 19 digits
INVALID_CARD = "6222021001123456788"  # same number, wrong check digit
VISA_CARD = "4532015112830366"
VALID_ID = "11010519491231002X"
INVALID_ID = "110105194912310021"  # check character should be X
ZH_DIGITS = "零一二三四五六七八九"


def spoken_zh(digits: str) -> str:
    """Digits as a Mandarin speaker reads them, one by one."""
    return "".join(ZH_DIGITS[int(d)] for d in digits)


def spoken_en(digits: str) -> str:
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    return " ".join(words[int(d)] for d in digits)


def seg(role: str, start_s: float, end_s: float, text: str, channel: int | None = None) -> SegmentText:
    if channel is None:
        channel = {"agent": 0, "customer": 1}.get(role, 0)
    return SegmentText(role, channel, start_s, end_s, text)


def call(
    *segments: SegmentText,
    duration_s: float | None = None,
    channels: int = 2,
    lang: str | None = None,
    agent_id: str | None = "agent-1",
    call_id: str = "call-1",
) -> CallText:
    languages = {str(c): lang for c in range(channels)} if lang else {}
    end = max((s.end_s for s in segments), default=0.0)
    return CallText(
        call_id, agent_id, duration_s if duration_s is not None else end, channels, tuple(segments), languages
    )


def pack_of(*rules: dict, name: str = "test-pack") -> RulePack:
    pack_name, _, parsed = parse_pack({"pack": name, "rules": list(rules)})
    return RulePack(names=(pack_name,), rules=tuple(parsed))
