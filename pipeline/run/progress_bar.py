"""The embedded run's progress bar: audio seconds done, throughput (RTFx) and ETA.

The runner reports a batch when it is finished, and one batch can be minutes of engine
time (a single hour-long call on a CPU is one batch). So a heartbeat thread redraws the
bar in between (every 2 s on a terminal, every 30 s into a log): the elapsed time moves and
the line counts the calls done, instead of a frozen 0 % that looks like a hang.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import IO

from tqdm import tqdm

from pipeline.events import RoutedCall


def audio_ms(calls: Sequence[RoutedCall]) -> int:
    """A progress bar's unit: whole milliseconds, so the finished parts add up to the total exactly."""
    return sum(round(c.duration_s * 1000) for c in calls)


class AudioProgress:
    def __init__(
        self, calls: Sequence[RoutedCall], file: IO[str] | None = None, heartbeat_s: float | None = None
    ) -> None:
        total_ms = audio_ms(calls)
        file = file if file is not None else sys.stderr
        if heartbeat_s is None:
            heartbeat_s = 2.0 if file.isatty() else 30.0
        self.calls_total, self.calls_done = len(calls), 0
        # Counted in whole milliseconds (shown as seconds): float sums in another order overshot
        # the total. The rate shown is audio seconds per wall second: the real-time factor (RTFx).
        self.bar = tqdm(
            total=total_ms,
            unit="audio-s",
            unit_scale=1 / 1000,
            dynamic_ncols=True,
            file=file,
            disable=not calls,  # a rerun with everything done: no empty 0/0 bar
            desc=f"{len(calls)} calls, {total_ms / 3_600_000:.2f} audio-h",
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} audio-s "
            "[{elapsed}<{remaining}, {rate_fmt}]{postfix}",
        )
        self.bar.set_postfix_str(self._postfix(), refresh=False)
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), daemon=True, name="progress")
        self._beat.start()

    def _postfix(self) -> str:
        if self.calls_done == self.calls_total:
            return ""
        return f"calls done {self.calls_done}/{self.calls_total}"

    def _heartbeat(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.bar.refresh()  # the elapsed time moves while a long batch is in the engine

    def done(self, calls: Sequence[RoutedCall]) -> None:
        self.calls_done += len(calls)
        self.bar.set_postfix_str(self._postfix(), refresh=False)
        self.bar.update(audio_ms(calls))

    def close(self) -> None:
        self._stop.set()
        self._beat.join()
        self.bar.close()
