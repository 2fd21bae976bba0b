"""Outcome values shared by the stages: what an adapter maps to an output topic or file.

Every stage returns one of its outcome types instead of raising; ``Dead`` is common to
all of them (the input goes to the stage's dead-letter topic with its reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pipeline.events import DeadLetter

Tag = TypeVar("Tag")  # what the caller needs back with each input (a Kafka message, a file name)


@dataclass(frozen=True)
class Dead(Generic[Tag]):
    """The input cannot be processed: dead-letter it (the letter keeps the original bytes)."""

    letter: DeadLetter
    tag: Tag | None = None
