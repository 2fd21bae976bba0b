"""What the router, QA and redaction steps share around their planners: which redrives are theirs,
the first dead letter among a plan's records, and a logger bound to the input's position."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from pipeline.headers import HeadersLike, addressed_to
from pipeline.stages.outputs import Received, Record


def is_own_redrive(topic: str, headers: HeadersLike, retry_topic: str, group: str | None) -> bool:
    """False only for a record on the stage's retry topic that a redrive addressed to another group."""
    return topic != retry_topic or addressed_to(headers, group or "")


def dead_record(records: Sequence[Record]) -> Record | None:
    """The dead letter a plan writes (a plan holds at most one), or None."""
    return next((r for r in records if r.letter is not None), None)


def bound_to_source(logger: structlog.stdlib.BoundLogger, received: Received) -> structlog.stdlib.BoundLogger:
    """``logger`` with the input's topic, partition and offset on every line (as is, without a source)."""
    source = received.source
    if source is None:
        return logger
    return logger.bind(topic=source.topic, partition=source.partition, offset=source.offset)
