"""Message size limits, from the topic catalog's ``max.message.bytes``. Pure: no Kafka.

A producer whose own limit (librdkafka ``message.max.bytes``, Faust's
``producer_max_request_size``) is below a topic's limit refuses a message the topic
would take: inside a transaction that error aborts the batch, the worker rewinds and
meets the same message again, for ever. So producers take their limit from the
catalog, and a stage checks each output against its topic's limit before sending:
an output that cannot fit becomes a dead letter (``output_too_large``) carrying the
small input that produced it, so nothing loops and nothing is lost.

A dead letter itself always fits its topic (:func:`fitting_letter`): one that would not
(an input near its topic's limit with a validation message of megabytes) carries the head
of its message and payload, ``truncated: true``, the payload's full size and the source
position, where the whole input still is.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.events import DeadLetter, SourcePosition, encode

if TYPE_CHECKING:
    from pipeline.catalog import TopicSpec

# Kafka's broker default for topics that do not set max.message.bytes.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1048588
# Record batch and record framing around one key and value (v2 format: 61 + about 20 bytes),
# with room for headers; a message is only sent when key + value + this fit the limit.
FRAMING_BYTES = 1024


@dataclass(frozen=True)
class MessageLimits:
    """Largest message each catalog topic takes, by catalog name (before any prefix)."""

    by_topic: dict[str, int]

    @classmethod
    def from_catalog(cls, specs: Iterable[TopicSpec]) -> MessageLimits:
        return cls({s.name: int(s.config.get("max.message.bytes", KAFKA_DEFAULT_MAX_MESSAGE_BYTES)) for s in specs})

    def limit(self, topic: str) -> int:
        return self.by_topic.get(topic, KAFKA_DEFAULT_MAX_MESSAGE_BYTES)

    def producer_max_bytes(self, topics: Iterable[str]) -> int:
        """The producer limit for a client writing these topics: the largest of their limits."""
        return max([self.limit(t) for t in topics] or [KAFKA_DEFAULT_MAX_MESSAGE_BYTES])

    def fits(self, topic: str, key: bytes | None, value: bytes) -> bool:
        return len(key or b"") + len(value) + FRAMING_BYTES <= self.limit(topic)

    def letter(self, topic: str, key: bytes | None, letter: DeadLetter) -> bytes:
        """The encoded letter to send to ``topic``, truncated to fit it where needed."""
        return encode(fitting_letter(letter, key, self.limit(topic)))


MAX_MESSAGE_CHARS = 4000  # of a truncated letter's message: the head of a long validation error says what
MAX_KEY_CHARS = 1024  # of a truncated letter's original_key (the record's own key is the original one)


def fitting_letter(letter: DeadLetter, key: bytes | None, limit_bytes: int) -> DeadLetter:
    """``letter`` when it fits a topic of ``limit_bytes`` sent with ``key``; else the letter with
    message, key and payload cut so that it does (``truncated``, ``original_payload_bytes`` set).

    Sizes are of the encoded JSON (escapes included); the payload gets what the rest leaves, as
    base64 (4 characters per 3 bytes). Only a record key near the limit itself can still not fit."""
    room = limit_bytes - FRAMING_BYTES - len(key or b"")
    if len(encode(letter)) <= room:
        return letter
    payload = letter.original_payload
    message = letter.message
    if len(message) > MAX_MESSAGE_CHARS:
        message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message)} characters in all)"
    original_key = letter.original_key[:MAX_KEY_CHARS] if letter.original_key else letter.original_key
    bare = letter.model_copy(
        update={
            "message": message,
            "original_key": original_key,
            "original_payload_b64": "",
            "truncated": True,
            "original_payload_bytes": len(payload),
        }
    )
    keep_bytes = max(0, room - len(encode(bare))) // 4 * 3
    return bare.model_copy(update={"original_payload_b64": base64.b64encode(payload[:keep_bytes]).decode()})


def too_large_letter(
    *,
    stage: str,
    topic: str,
    size_bytes: int,
    limit_bytes: int,
    payload: bytes,
    key: bytes | None,
    source: SourcePosition | None,
) -> DeadLetter:
    """The dead letter for an output that its topic cannot take; ``payload`` is the stage's input."""
    return DeadLetter.of(
        payload=payload,
        key=key,
        reason="output_too_large",
        stage=stage,
        source=source,
        message=f"{topic} output of {size_bytes} bytes is over the topic's {limit_bytes}-byte max.message.bytes",
    )
