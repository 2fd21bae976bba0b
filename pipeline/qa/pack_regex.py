"""Rule-pack regular expressions on RE2: matching takes time linear in the text, whatever the pattern.

A backtracking engine can take exponential time on a pattern such as ``(a+)+b`` and would hang the
QA stage on one transcript. RE2 has no backtracking; what it cannot run in linear time
(backreferences, lookaround) it refuses to compile, and a pack using it is refused at load.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Protocol

import re2


class PatternMatch(Protocol):
    def start(self) -> int: ...

    def end(self) -> int: ...

    def group(self) -> str: ...


class BoundedPattern(Protocol):
    def finditer(self, text: str) -> Iterator[PatternMatch]: ...


class UnboundedPatternError(ValueError):
    """A pattern that is a valid Python regex but needs backtracking (RE2 refuses it)."""


def _options(ignore_case: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # the refusal is reported by the pack loader, not on stderr
    return options


def compile_bounded(pattern: str, ignore_case: bool = True) -> BoundedPattern:
    """RE2 form of an operator's pattern; ``re.error`` when it is no regex at all, else
    :class:`UnboundedPatternError` when it uses what RE2 cannot run in linear time."""
    re.compile(pattern)  # a syntax error reads as Python's message, as operators write Python regexes
    try:
        compiled: BoundedPattern = re2.compile(pattern, _options(ignore_case))
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnboundedPatternError(
            f"{reason}: pack regexes run in linear time on RE2, which has no backreferences, lookaround, "
            "atomic groups or possessive quantifiers"
        ) from None
    return compiled
