"""Ctrl-C for the embedded run, including one that a decoder swallowed.

soundfile reads in-memory audio through Python callbacks called from C (cffi). A Ctrl-C that
lands in one is printed and dropped there, and the read fails ("No 'data' chunk marker"): the
call would be dead-lettered as corrupt and the run would go on. The handler here remembers
every Ctrl-C, so the runner can stop before it writes the outcomes of a batch that was being
read when the signal came.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Interrupts:
    """Whether Ctrl-C was pressed while :meth:`watching` was active."""

    def __init__(self) -> None:
        self.seen = False

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt

    @contextmanager
    def watching(self) -> Iterator[Interrupts]:
        """Remember Ctrl-C (and raise KeyboardInterrupt, as by default) inside the block; only the
        main thread can take signals, so elsewhere this only yields."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)
