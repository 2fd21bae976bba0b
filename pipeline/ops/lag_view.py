"""Presenting the backlog: rows for a rich table or JSON, and the sample history between runs."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from pipeline.runtime.backlog import PartitionBacklog
from pipeline.ops.lag import GroupSummary, RateTracker, held_s, partition_rate
from pipeline.ops.times import zone_label


def load_tracker(path: Path, window_s: float) -> RateTracker:
    tracker = RateTracker(window_s=window_s)
    try:
        data = json.loads(path.read_text())
        tracker.samples = {k: [tuple(s) for s in v] for k, v in data.get("samples", {}).items()}
        tracker.members = {k: [(t, int(n)) for t, n in v] for k, v in data.get("members", {}).items()}
    except (OSError, ValueError):
        pass  # no history yet (or unreadable): rates start from this run's samples
    return tracker


def save_tracker(path: Path, tracker: RateTracker) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"samples": tracker.samples, "members": tracker.members}))


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def as_json(rows: list[PartitionBacklog], summaries: list[GroupSummary], tracker: RateTracker,
            now: datetime, end: datetime | None, took_s: float) -> dict[str, Any]:
    def partition(row: PartitionBacklog) -> dict[str, Any]:
        fields = {**asdict(row), "consumed_by_lane": {str(k): v for k, v in row.consumed_by_lane.items()}}
        return {**fields, "rate": partition_rate(tracker, row), "held_s": held_s(row, now)}

    return {
        "now": now.isoformat(timespec="milliseconds"), "window_end": end.isoformat() if end else None,
        "took_s": round(took_s, 3),
        "stages": [{"stage": s.stage, "group": s.group, "messages": s.messages, "audio_s": s.audio_s,
                    "rate": s.rate, "rate_unit": s.rate_unit, "members": s.members, "eta_s": s.verdict.eta_s,
                    "margin_s": s.verdict.margin_s, "held_s": s.verdict.held_s, "status": s.verdict.status,
                    "verdict": s.verdict.text()}
                   for s in summaries],
        "partitions": [partition(r) for r in rows],
    }


def table(rows: list[PartitionBacklog], summaries: list[GroupSummary], tracker: RateTracker,
          now: datetime, end: datetime | None, took_s: float, partitions: bool = True) -> Table:
    ends = f", window ends {end:%a %H:%M} {zone_label(end)}" if end else ""
    title = f"callqa lag at {now:%H:%M:%S} {zone_label(now)}{ends} (read in {took_s:.2f} s)"
    out = Table(title=title, title_justify="left")
    for name, justify in [("stage", "left"), ("group", "left"), ("part", "right"), ("msgs behind", "right"),
                          ("audio behind", "right"), ("rate", "right"), ("ETA", "right"), ("verdict", "left")]:
        out.add_column(name, justify=justify)
    for s in summaries:
        rate = "-" if s.rate is None else f"{s.rate:.2f} {s.rate_unit}"
        style = {"at risk": "bold red", "stalled": "bold red", "on track": "green", "done": "green"}.get(
            s.verdict.status)
        out.add_row(s.stage, s.group, "all", str(s.messages), _hms(s.audio_s), rate, _hms(s.verdict.eta_s),
                    s.verdict.text(), style=style)
        if not partitions:
            continue
        for r in rows:
            if (r.stage, r.group) != (s.stage, s.group) or (r.messages == 0 and s.messages == 0
                                                              and r.held_since is None):
                continue
            rate_p = partition_rate(tracker, r)
            out.add_row("", "", str(r.partition), str(r.messages) + ("" if r.exact else "~"), _hms(r.audio_s),
                        "-" if rate_p is None else f"{rate_p:.2f}", "", "", style="dim")
    return out
