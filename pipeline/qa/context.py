"""One call prepared for the rules: normalised and redacted segments, PII hits, and rule scope.

Prepared once per call so that every rule matches the same normalised text and
every finding quotes the same redacted evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pipeline.numbers.model import SegmentText
from pipeline.numbers.normalize import Normalized, normalize
from pipeline.numbers.pii import PIIHit
from pipeline.qa.model import CallText

MAX_EVIDENCE_CHARS = 300
KNOWN_ROLES = ("agent", "customer")


class Window(Protocol):
    """A rule's time scope (every rule model has these fields)."""

    @property
    def within_first_s(self) -> float | None: ...
    @property
    def within_last_s(self) -> float | None: ...


class Scope(Window, Protocol):
    """A rule's role and time scope."""

    @property
    def role(self) -> str: ...


@dataclass(frozen=True)
class PreparedSegment:
    index: int
    segment: SegmentText
    norm: Normalized
    redacted: str

    def time_at(self, norm_offset: int) -> float:
        """Estimated call time of a normalised character: segments carry no word times, so
        interpolate linearly over the segment."""
        seg = self.segment
        length = max(len(self.norm.text), 1)
        return seg.start_s + (seg.end_s - seg.start_s) * min(norm_offset, length) / length


@dataclass(frozen=True)
class CallContext:
    call: CallText
    segments: tuple[PreparedSegment, ...]
    pii: tuple[PIIHit, ...]

    @property
    def has_speech(self) -> bool:
        """False for a call whose transcript holds no words at all (dead line, no connection)."""
        return any(p.norm.text.strip() for p in self.segments)

    @property
    def roles_known(self) -> bool:
        """False for a mono call without (confident) separation: every segment is 'mixed'."""
        return any(p.segment.role in KNOWN_ROLES for p in self.segments)

    def role_matches(self, scope_role: str, role: str, unknown_speaker: str = "judge") -> bool:
        # Speech of an unknown speaker (a mono call not, or not confidently, separated: 'mixed')
        # may be anyone's: an agent-scoped rule still judges it (a disclosure cannot be missing
        # just because nobody diarised) unless the rule skips unknown speakers.
        if scope_role == "any" or role == scope_role:
            return True
        return role not in KNOWN_ROLES and unknown_speaker == "judge"

    def in_window(self, rule: Window, start_s: float, end_s: float) -> bool:
        """Does [start_s, end_s] touch the rule's time window?"""
        if rule.within_first_s is not None:
            return start_s < rule.within_first_s
        if rule.within_last_s is not None:
            return end_s > self.call.duration_s - rule.within_last_s
        return True

    def window(self, rule: Window) -> tuple[float, float]:
        """The rule's window in call time, for findings about something missing."""
        first, last = rule.within_first_s, rule.within_last_s
        duration = self.call.duration_s
        if first is not None:
            return (0.0, min(first, duration) if duration else first)
        if last is not None:
            return (max(duration - last, 0.0), duration)
        return (0.0, duration)

    def scoped(self, rule: Scope) -> list[PreparedSegment]:
        """The segments a rule looks at: its role, its time window."""
        return [
            p
            for p in self.segments
            if self.role_matches(rule.role, p.segment.role, getattr(rule, "unknown_speaker", "judge"))
            and self.in_window(rule, p.segment.start_s, p.segment.end_s)
        ]


def prepare(
    call: CallText, redacted: Sequence[str], norms: Sequence[Normalized], pii: Sequence[PIIHit]
) -> CallContext:
    segments = tuple(PreparedSegment(i, seg, norms[i], redacted[i]) for i, seg in enumerate(call.segments))
    return CallContext(call, segments, tuple(pii))


def normalize_all(call: CallText) -> list[Normalized]:
    return [normalize(s.text) for s in call.segments]


def evidence(segments: Sequence[PreparedSegment]) -> str:
    """Redacted text of the segments, joined and cut to a readable length."""
    text = " … ".join(p.redacted.strip() for p in segments if p.redacted.strip())
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[: MAX_EVIDENCE_CHARS - 1] + "…"
