"""Unions and differences of [start, end) intervals: seconds of speech (QA metrics), samples to cut
(audio redaction), characters to mask (unheard numbers), speech heard only when cleaned (VAD). Pure."""

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


def subtract_intervals(intervals: Iterable[tuple[N, N]], taken: Iterable[tuple[N, N]]) -> list[tuple[N, N]]:
    """The parts of the union of ``intervals`` that no interval of ``taken`` covers, sorted."""
    out: list[tuple[N, N]] = []
    cuts = merge_intervals(taken)
    for start, end in merge_intervals(intervals):
        for cut_start, cut_end in cuts:
            if cut_end <= start or cut_start >= end:
                continue
            if cut_start > start:
                out.append((start, cut_start))
            start = max(start, cut_end)
            if start >= end:
                break
        if start < end:
            out.append((start, end))
    return out
