"""Errors of the QA stage, under the pipeline's root :class:`~pipeline.errors.CallQAError`."""

from __future__ import annotations

from pipeline.errors import CallQAError


class QAError(CallQAError):
    """Root of the QA stage's own errors."""


class RulePackError(QAError):
    """A rule pack is unreadable or invalid; the message names the pack, the rule and the problem."""


class CallTextError(QAError):
    """A transcript handed to the engine is not usable (bad times, missing fields)."""
