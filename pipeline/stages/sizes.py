"""Message size limits, from the topic catalog's ``max.message.bytes``. Pure: no Kafka.

A producer whose own limit (librdkafka ``message.max.bytes``, Faust's
``producer_max_request_size``) is below a topic's limit refuses a message the topic
would take: inside a transaction that error aborts the batch, the worker rewinds and
meets the same message again, for ever. So producers take their limit from the
catalog, and a stage checks each output against its topic's limit before sending:
an output that cannot fit becomes a dead letter (``output_too_large``) carrying the
small input that produced it, so nothing loops and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.events import DeadLetter, SourcePosition

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
