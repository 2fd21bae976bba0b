"""Replay lineage: how a replayed result keeps its input's identity (pure).

Each stage that runs as a replay (a router generation, an ASR or QA replay group) *adds* its
replay id to the lineage of its input; it never replaces it. The event's ``replay_id`` is the
lineage joined by ``/`` (``None`` for the first run), so ``(call_id, replay_id)`` names one
result for any chain of replays: an original transcript and an ASR replay's transcript, both
evaluated by QA replay ``q3``, give ``q3`` and ``asr-r2/q3``. A replay id cannot contain ``/``,
so the join is reversible.
"""

from __future__ import annotations

import re

from pipeline.errors import ConfigError

SEPARATOR = "/"
_REPLAY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")


def check_replay_id(value: str) -> str:
    """A replay id as an operator gives it: letters, digits, ``. _ : -``, no ``/``."""
    if not _REPLAY_ID.fullmatch(value):
        raise ConfigError(f"replay id {value!r}: use letters, digits and . _ : - (up to 100, no '/')")
    return value


def lineage_of(replay_id: str | None) -> list[str]:
    """The lineage an event's ``replay_id`` stands for (also for 1.1 events, which carry no list)."""
    return replay_id.split(SEPARATOR) if replay_id else []


def replay_id_of(lineage: list[str]) -> str | None:
    return SEPARATOR.join(lineage) or None


def extended(lineage: list[str], own: str | None) -> list[str]:
    """The lineage of a stage's output: the input's, plus this stage's replay id when it replays."""
    return [*lineage, own] if own else list(lineage)
