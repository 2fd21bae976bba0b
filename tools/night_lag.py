"""`callqa lag` sampled through a simulated night, as an operator's cron would run it.

Each sample is one ``callqa lag --json`` process; the command keeps its rate history in the
state directory between runs, so from the second sample on the throughput is measured over the
rate window (the operator's 300 s, compressed by the night's time scale), not over a fresh
few-second reading. The samples give the ETA against the actual finish and the backlog per
bucket over the night.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from tests.processes import settings_env

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class LagSample:
    at_s: float  # wall seconds since the burst was published, when lag read the offsets
    share_done: float  # calls finished (transcribed or dead-lettered) when the command started
    eta_s: float | None  # the slowest ASR group's ETA (wall seconds from at_s)
    backlog_audio_s: dict[str, float]  # per bucket: audio seconds its ASR group is behind
    router_behind: int | None  # arrivals the router has not consumed yet (messages)
    members: dict[str, int | None] = field(default_factory=dict)  # per bucket: its group's consumers
    rates: dict[str, float | None] = field(default_factory=dict)  # per bucket: audio s/s as lag measured it


def parse_lag(data: dict[str, Any], published_at: float, share_done: float) -> LagSample:
    """One sample from ``callqa lag --json`` (:func:`pipeline.ops.lag_view.as_json`)."""
    at_s = datetime.fromisoformat(data["now"]).timestamp() - published_at
    asr = [s for s in data.get("stages", []) if s["stage"].startswith("asr-")]
    etas = [s["eta_s"] for s in asr if s["eta_s"] is not None]
    router = [s["messages"] for s in data.get("stages", []) if s["stage"] == "router"]
    return LagSample(
        at_s=round(at_s, 3),
        share_done=round(share_done, 4),
        eta_s=round(max(etas), 2) if etas else None,
        backlog_audio_s={s["stage"][4:]: s["audio_s"] for s in asr if s["audio_s"] is not None},
        router_behind=sum(router) if router else None,
        members={s["stage"][4:]: s.get("members") for s in asr},
        rates={s["stage"][4:]: s["rate"] for s in asr},
    )


def eta_errors(
    samples: list[LagSample], finish_s: float, from_share: float = 0.1, from_s: float = 0.0
) -> list[tuple[float, float]]:
    """(share done, relative error of at + ETA against the actual finish) for the samples taken once
    ``from_share`` of the night was done (and at ``from_s`` or later) that had an ETA; positive:
    predicted later than it was."""
    return [
        (s.share_done, round((s.at_s + s.eta_s - finish_s) / finish_s, 4))
        for s in samples
        if s.eta_s is not None and s.share_done >= from_share and from_s <= s.at_s < finish_s
    ]


def _errors_summary(errors: list[tuple[float, float]]) -> dict[str, Any]:
    if not errors:
        return {"worst": None, "median_abs": None, "first": None, "samples": 0}
    return {
        "worst": max(errors, key=lambda e: abs(e[1]))[1],
        "median_abs": round(statistics.median(abs(e) for _, e in errors), 4),
        "first": errors[0][1],
        "samples": len(errors),
    }


def eta_summary(samples: list[LagSample], finish_s: float, settled_from_s: float | None = None) -> dict[str, Any]:
    """The worst and the median ETA error after 10 % of the night, and the first sample's; with
    ``settled_from_s`` (the last membership change of the night plus a few samples), the same for the
    samples from then on: no ETA can know of a worker added or killed later, so the figures before
    it measure the night's events as much as the estimate."""
    summary = _errors_summary(eta_errors(samples, finish_s))
    if settled_from_s is not None:
        summary["settled_from_s"] = round(settled_from_s, 2)
        summary["settled"] = _errors_summary(eta_errors(samples, finish_s, from_s=settled_from_s))
    return summary


@dataclass
class LagSampler:
    """Runs ``callqa lag --json`` in the background every ``every_s`` seconds; one at a time."""

    settings: Settings
    published_at: float
    every_s: float
    rate_window_s: float
    samples: list[LagSample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[str] | None = None
    _share: float = 0.0
    _last_start: float = 0.0

    def tick(self, share_done: float) -> None:
        """Collect a finished sample; start the next when it is due."""
        if self._proc is not None:
            if self._proc.poll() is None:
                return
            out, err = self._proc.communicate()
            try:
                self.samples.append(parse_lag(json.loads(out), self.published_at, self._share))
            except (ValueError, KeyError) as exc:
                self.failures.append(f"{exc}: {err[-300:]}")
            self._proc = None
        now = time.time()
        if now - self._last_start >= self.every_s:
            self._last_start, self._share = now, share_done
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pipeline.cli",
                    "lag",
                    "--json",
                    "--sample-s",
                    "2",
                    "--rate-window-s",
                    str(self.rate_window_s),
                ],
                env=settings_env(self.settings),
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        self._proc = None
