"""The engine's input (:class:`CallText`) and output (:class:`CallQAResult`) as plain frozen data.

The engine does not import the event models: :func:`call_text_from` builds its
input from any object (or mapping) with the Transcript's fields, and
:meth:`CallQAResult.to_dict` has the field names of the ``qa.findings`` event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from pipeline.numbers.model import PIIType, SegmentText
from pipeline.qa.errors import CallTextError

Severity = Literal["info", "low", "medium", "high", "critical"]
SEVERITIES: tuple[Severity, ...] = ("info", "low", "medium", "high", "critical")
RuleKind = Literal[
    "keyword", "regex", "forbidden_phrase", "required_disclosure", "pii",
    "long_silence", "talk_over", "speech_rate", "talk_ratio",
]  # fmt: skip


@dataclass(frozen=True)
class LanguageNote:
    """A call spoken in a language the rule packs are not written for: it is not judged."""

    language: str
    probability: float
    channels: tuple[int, ...]


@dataclass(frozen=True)
class CallText:
    """What the engine needs of a transcript; segments sorted by start time."""

    call_id: str
    agent_id: str | None
    duration_s: float
    channels: int
    segments: tuple[SegmentText, ...]
    languages: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    unsupported_language: LanguageNote | None = None

    def language_of(self, channel: int) -> str | None:
        return self.languages.get(str(channel))


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def call_text_from(obj: Any) -> CallText:
    """Build a :class:`CallText` from a Transcript event, any look-alike object, or a dict.

    Raises :class:`CallTextError` when a field is missing or a segment's times are impossible.
    """
    call_id = _get(obj, "call_id")
    if not isinstance(call_id, str) or not call_id:
        raise CallTextError("transcript has no call_id")
    raw_segments = _get(obj, "segments")
    if raw_segments is None:
        raise CallTextError(f"call {call_id}: transcript has no segments field")
    segments = tuple(
        sorted((_segment(call_id, s) for s in raw_segments), key=lambda s: (s.start_s, s.channel))
    )
    duration_s = float(_get(obj, "duration_s", 0.0) or 0.0)
    if not math.isfinite(duration_s) or duration_s < 0:
        raise CallTextError(f"call {call_id}: duration_s must be a finite number >= 0, got {duration_s}")
    duration_s = max([duration_s, *(s.end_s for s in segments)])
    channels = int(_get(obj, "channels", 1) or 1)
    if channels < 1:
        raise CallTextError(f"call {call_id}: channels must be >= 1, got {channels}")
    return CallText(
        call_id=call_id,
        agent_id=_get(obj, "agent_id"),
        duration_s=duration_s,
        channels=channels,
        segments=segments,
        languages={str(k): str(v) for k, v in dict(_get(obj, "languages") or {}).items()},
        metadata={str(k): str(v) for k, v in dict(_get(obj, "metadata") or {}).items()},
        unsupported_language=_language_note(_get(obj, "unsupported_language")),
    )


def _language_note(raw: Any) -> LanguageNote | None:
    if raw is None:
        return None
    try:
        return LanguageNote(str(_get(raw, "language")), float(_get(raw, "probability")),
                            tuple(int(c) for c in _get(raw, "channels") or ()))
    except (TypeError, ValueError) as exc:
        raise CallTextError(f"malformed unsupported_language {raw!r}: {exc}") from exc


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _segment(call_id: str, raw: Any) -> SegmentText:
    try:
        seg = SegmentText(
            role=str(_get(raw, "role")),
            channel=int(_get(raw, "channel", 0)),
            start_s=float(_get(raw, "start_s")),
            end_s=float(_get(raw, "end_s")),
            text=str(_get(raw, "text") or ""),
            role_confidence=_optional_float(_get(raw, "role_confidence")),
        )
    except (TypeError, ValueError) as exc:
        raise CallTextError(f"call {call_id}: malformed segment {raw!r}: {exc}") from exc
    if (
        not (math.isfinite(seg.start_s) and math.isfinite(seg.end_s))
        or seg.start_s < 0
        or seg.end_s < seg.start_s
    ):
        raise CallTextError(f"call {call_id}: segment times {seg.start_s}..{seg.end_s} are impossible")
    return seg


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one stretch of a call. ``evidence`` is redacted text."""

    rule_id: str
    kind: RuleKind
    severity: Severity
    role: str | None
    start_s: float | None
    end_s: float | None
    evidence: str
    message: str
    confidence: float | None = None  # matches: 1.0 exact, lower for a fuzzy phrase or a likely number


@dataclass(frozen=True)
class PIISpan:
    """Where personal data was spoken: its type and time, never its value."""

    type: PIIType
    role: str
    start_s: float
    end_s: float
    confidence: float = 1.0


@dataclass(frozen=True)
class CallQAResult:
    """Everything the QA stage says about one call."""

    call_id: str
    agent_id: str | None
    score: float
    findings: tuple[Finding, ...]
    pii: tuple[PIISpan, ...]
    redacted_segments: tuple[SegmentText, ...]
    rule_packs: tuple[str, ...] = ()
    no_speech: bool = False  # nothing was said: the call may not have connected
    judged: bool = True  # False: no rule could judge it (unsupported_language); its score is 0
    unsupported_language: LanguageNote | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form with the field names of the ``qa.findings`` event."""
        out = asdict(self)
        for key in ("findings", "pii", "redacted_segments", "rule_packs"):
            out[key] = list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallQAResult:
        """Inverse of :meth:`to_dict` (also reads a decoded ``qa.findings`` event); extra keys ignored."""
        try:
            return cls(
                call_id=str(data["call_id"]),
                agent_id=data.get("agent_id"),
                score=float(data["score"]),
                findings=tuple(Finding(**_pick(f, Finding)) for f in data.get("findings", ())),
                pii=tuple(PIISpan(**_pick(p, PIISpan)) for p in data.get("pii", ())),
                redacted_segments=tuple(
                    SegmentText(**_pick(s, SegmentText)) for s in data.get("redacted_segments", ())
                ),
                rule_packs=tuple(data.get("rule_packs", ())),
                no_speech=bool(data.get("no_speech", False)),
                judged=bool(data.get("judged", True)),
                unsupported_language=_language_note(data.get("unsupported_language")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CallTextError(f"not a QA result: {exc}") from exc


def _pick(obj: Any, cls: type) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    if isinstance(obj, Mapping):
        return {k: obj.get(k) for k in names}
    return {k: getattr(obj, k, None) for k in names}
