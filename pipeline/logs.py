"""structlog set-up: JSON lines when not on a terminal, readable console output on one.

Event names are ``noun_verb``; adapters bind call id / topic / partition / offset per
record. Transcript text and PII are never logged.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

LogFormat = Literal["auto", "json", "console"]


class _Stderr:
    """The stderr logging was set up with while it is open, else whatever ``sys.stderr`` is then:
    a command run in-process (a test's CLI runner) swaps stderr and closes it afterwards. Not the
    current stderr always: a Faust worker redirects ``sys.stderr`` into its own log lines, and
    operators and tests read the stage's JSON lines from the real one."""

    def __init__(self) -> None:
        self._at_setup = sys.stderr

    def _stream(self) -> TextIO:
        return self._at_setup if not self._at_setup.closed else sys.stderr

    def write(self, text: str) -> int:
        return self._stream().write(text)

    def flush(self) -> None:
        self._stream().flush()


def configure_logging(fmt: LogFormat = "auto", level: str = "info") -> None:
    json_output = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer = structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
