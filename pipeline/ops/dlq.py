"""Dead letters for operators (pure): selection, decoding for display, and the redrive plan.

A letter is identified by where it sits: ``<dlq topic>:<partition>:<offset>``. A redrive sends
the original payload back to its source topic and partition with the ``callqa-redrive-attempt``
header set to the letter's attempt count; a stage that fails it again writes a new letter with
one attempt more. A letter already at ``max_attempts`` is parked (``dlq.parked``) instead of
looping. Either way a marker on the compacted ``dlq.handled`` topic records that the letter is
dealt with, so a second redrive of the same selection does nothing.
"""

from __future__ import annotations

import base64
import fnmatch
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from pipeline.events import DeadLetter
from pipeline.ops.headers import REDRIVE_ATTEMPT


@dataclass(frozen=True)
class StoredLetter:
    topic: str
    partition: int
    offset: int
    letter: DeadLetter
    handled: str | None = None  # "redriven ..." / "parked ..." once dealt with

    @property
    def id(self) -> str:
        return letter_id(self.topic, self.partition, self.offset)


def letter_id(topic: str, partition: int, offset: int) -> str:
    return f"{topic}:{partition}:{offset}"


@dataclass(frozen=True)
class Selection:
    ids: frozenset[str] = frozenset()
    reasons: frozenset[str] = frozenset()
    key_patterns: tuple[str, ...] = ()  # shell globs on the original key
    since: datetime | None = None
    until: datetime | None = None
    include_handled: bool = False

    def matches(self, stored: StoredLetter) -> bool:
        letter = stored.letter
        if stored.handled and not self.include_handled:
            return False
        if self.ids and stored.id not in self.ids:
            return False
        if self.reasons and letter.reason not in self.reasons:
            return False
        if self.key_patterns and not any(fnmatch.fnmatchcase(letter.original_key or "", p) for p in self.key_patterns):
            return False
        if self.since and letter.failed_at < self.since:
            return False
        return not (self.until and letter.failed_at >= self.until)


@dataclass(frozen=True)
class Action:
    kind: Literal["redrive", "park", "skip"]
    stored: StoredLetter
    topic: str | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    why: str = ""


def plan_redrive(letters: list[StoredLetter], selection: Selection, max_attempts: int) -> list[Action]:
    actions = []
    for stored in letters:
        if not selection.matches(stored):
            continue
        letter = stored.letter
        if letter.source is None:
            actions.append(Action("skip", stored, why="the letter does not say where its payload came from"))
        elif letter.attempts >= max_attempts:
            actions.append(Action("park", stored, why=f"{letter.attempts} attempts, the maximum is {max_attempts}"))
        else:
            actions.append(Action("redrive", stored, letter.source.topic, letter.source.partition,
                                  [(REDRIVE_ATTEMPT, str(letter.attempts).encode())],
                                  why=f"attempt {letter.attempts + 1} of {max_attempts}"))
    return actions


def with_attempts(letter: DeadLetter, redrive_attempt: int) -> DeadLetter:
    """The letter for an input that arrived as redrive number ``redrive_attempt`` (0: first try)."""
    return letter.model_copy(update={"attempts": redrive_attempt + 1}) if redrive_attempt else letter


def decoded_payload(letter: DeadLetter) -> Any:
    """The original payload for display: JSON when it parses, else text, else base64."""
    raw = letter.original_payload
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode(), "bytes": len(raw)}


def summary_row(stored: StoredLetter) -> dict[str, Any]:
    letter = stored.letter
    return {"id": stored.id, "stage": letter.stage, "reason": letter.reason, "attempts": letter.attempts,
            "key": letter.original_key, "failed_at": letter.failed_at.astimezone().isoformat(timespec="seconds"),  # the local zone
            "source": f"{letter.source.topic}[{letter.source.partition}]@{letter.source.offset}" if letter.source else None,
            "state": stored.handled or "open", "message": letter.message}
