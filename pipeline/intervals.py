"""Unions of [start, end) intervals: seconds of speech (QA metrics), samples to cut (audio
redaction), characters to mask (unheard numbers). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

N = TypeVar("N", int, float)


def merge_intervals(intervals: Iterable[tuple[N, N]]) -> list[tuple[N, N]]:
    """Union of [start, end) intervals, sorted, touching ones joined, empty ones dropped."""
    merged: list[tuple[N, N]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
