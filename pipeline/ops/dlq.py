"""Dead letters for operators (pure): selection, decoding for display, and the redrive plan.

A letter is identified by where it sits: ``<dlq topic>:<partition>:<offset>``. It records the
consumer group that failed its input (and that group's replay id) and the input's processing
headers (:data:`pipeline.headers.PROCESSING`, e.g. the replay generation).

A redrive sends the original payload to the failing stage's retry topic (``router.retry``,
``qa.retry``), never back into a shared topic such as ``asr.transcripts``: every group of the stage
reads its retry topic beside its input, and only the group named in the record's
``callqa-retry-group`` header processes it. An ASR letter goes back to its bucket topic partition,
which only ASR groups read, addressed the same way: a worker subscribed to a second topic would be
given all of one topic's partitions by the cooperative assignor, and sit idle beside a busy peer. The record carries the letter's headers
back, plus ``callqa-redrive-attempt`` (the letter's attempt count); a stage that fails it again
writes a new letter with one attempt more. A router letter goes to the retry partition of its
arrival's partition number (``router.retry`` is co-partitioned with ``audio.arrivals``, like the
de-dup markers). A letter already at ``max_attempts`` is parked (``dlq.parked``) instead of
looping; a truncated letter (its input was too large for a letter) is skipped: the input is at
its source position. Either way a marker on the compacted ``dlq.handled`` topic records that
the letter is dealt with, so a second redrive of the same selection does nothing.
"""

from __future__ import annotations

import base64
import fnmatch
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from pipeline.events import DeadLetter
from pipeline.headers import REDRIVE_ATTEMPT, RETRY_GROUP

Stage = Literal["router", "asr", "qa", "redact"]
RETRY_TOPICS: dict[str, str] = {"router": "router.retry", "qa": "qa.retry", "redact": "redact.retry"}
# The groups a stage runs as unless told otherwise: a letter of schema 1.1 does not name its group.
DEFAULT_GROUPS = {"router": "callqa-router", "qa": "callqa-qa", "redact": "callqa-redact"}


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


def failing_group(letter: DeadLetter, topic_prefix: str = "") -> str | None:
    """The group to redrive to: the letter's own, or (a 1.x letter without one) the stage's default
    group; for ASR that is ``<prefix>asr-<bucket>`` of the bucket topic the letter came from."""
    if letter.group:
        return letter.group
    if letter.stage != "asr":
        return DEFAULT_GROUPS[letter.stage]
    marker = "audio.bucket."
    if letter.source is None or marker not in letter.source.topic:
        return None
    return f"{topic_prefix}asr-{letter.source.topic.rsplit(marker, 1)[1]}"


def plan_redrive(letters: list[StoredLetter], selection: Selection, max_attempts: int,
                 topic_prefix: str = "") -> list[Action]:
    """What to do with each selected letter; ``topic`` is a catalog name (the caller adds the prefix)."""
    actions = []
    for stored in letters:
        if not selection.matches(stored):
            continue
        letter = stored.letter
        group = failing_group(letter, topic_prefix)
        if letter.source is None or group is None:
            actions.append(Action("skip", stored, why="the letter does not say where its payload came from"))
        elif letter.truncated:
            actions.append(Action("skip", stored, why=(
                f"truncated letter ({letter.original_payload_bytes} bytes of input): read the input at "
                f"{letter.source.topic}[{letter.source.partition}]@{letter.source.offset}")))
        elif letter.attempts >= max_attempts:
            actions.append(Action("park", stored, why=f"{letter.attempts} attempts, the maximum is {max_attempts}"))
        else:
            headers = [*((k, v.encode()) for k, v in sorted(letter.headers.items())),
                       (REDRIVE_ATTEMPT, str(letter.attempts).encode()), (RETRY_GROUP, group.encode())]
            # router.retry is co-partitioned with audio.arrivals (the de-dup markers); an ASR letter goes
            # back to its bucket partition (only the ASR groups read it, and the header addresses one)
            partition = letter.source.partition if letter.stage in ("router", "asr") else None
            topic = RETRY_TOPICS.get(letter.stage) or letter.source.topic.removeprefix(topic_prefix)
            actions.append(Action("redrive", stored, topic, partition, headers,
                                  why=f"attempt {letter.attempts + 1} of {max_attempts}, group {group}"))
    return actions


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
