"""The two types the number knowledge speaks in: a stretch of speech and a kind of personal number."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PIIType = Literal["bank_card", "cn_resident_id", "phone", "us_ssn", "account_number", "card_secret"]


@dataclass(frozen=True)
class SegmentText:
    """One stretch of speech on one channel, in call time."""

    role: str  # "agent" | "customer" | "mixed" (or an operator's own label)
    channel: int
    start_s: float
    end_s: float
    text: str
    role_confidence: float | None = None  # a separated mono call's role: how sure (None: the channel's role)
