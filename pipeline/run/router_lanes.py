"""The router's progress totals per lane, taken up from the bucket topics when it is assigned arrivals.

A lane is an arrivals partition (and its ``router.retry`` partition, co-assigned): its owner is
the one router stamping it, so it continues the lane's totals from their last stamp in each bucket
partition, read before it routes from the lane (another router may have advanced them), and drops
them when the lane moves on. See :mod:`pipeline.headers`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable

from pipeline.config import Settings
from pipeline.headers import PartitionProgress, Stamp
from pipeline.logs import get_logger

TP = tuple[str, int]

log = get_logger("callqa.router")


class LaneTotals:
    """Reads an assigned lane's totals in the background; routing from the lane waits for them."""

    def __init__(
        self, settings: Settings, bucket_topics: list[str], arrivals_topic: str, progress: PartitionProgress
    ) -> None:
        self.settings = settings
        self.bucket_topics = bucket_topics
        self.arrivals_topic = arrivals_topic
        self.progress = progress
        self._reads: dict[int, asyncio.Task[list[tuple[TP, Stamp]]]] = {}

    def _lanes(self, tps: Iterable[object]) -> list[int]:
        return [tp.partition for tp in tps if getattr(tp, "topic", None) == self.arrivals_topic]  # type: ignore[attr-defined]

    def on_assigned(self, tps: Iterable[object]) -> None:
        lanes = [lane for lane in self._lanes(tps) if lane not in self._reads]
        if lanes:
            task = asyncio.get_running_loop().create_task(self._read(lanes))
            self._reads.update(dict.fromkeys(lanes, task))

    def on_revoked(self, tps: Iterable[object]) -> None:
        lanes = self._lanes(tps)
        self.progress.forget(lanes)  # the next owner continues them; ours would be stale if they came back
        for lane in lanes:
            self._reads.pop(lane, None)

    async def ready(self, lane: int) -> None:
        """Wait until the lane's totals are read (only the read of the current assignment counts)."""
        task = self._reads.get(lane)
        if task is None:
            return
        found = await task
        if self._reads.get(lane) is task:
            del self._reads[lane]
            self.progress.forget([lane])  # anything stamped meanwhile went into an aborted transaction
            for (topic, partition), stamp in found:
                if stamp.lane == lane:
                    self.progress.recover(topic, partition, stamp)

    async def _read(self, lanes: list[int]) -> list[tuple[TP, Stamp]]:
        from pipeline.runtime.lag_kafka import lane_totals  # the Kafka client: in the router process only

        loop, delay = asyncio.get_running_loop(), 1.0
        while True:
            started = time.perf_counter()
            try:
                found = await loop.run_in_executor(None, lane_totals, self.settings, self.bucket_topics, lanes)
                log.info(
                    "lane_totals_read", lanes=lanes, stamps=len(found), seconds=round(time.perf_counter() - started, 3)
                )
                return found
            except Exception as exc:  # noqa: BLE001 - the broker may come back; routing from the lanes waits
                log.warning(
                    "lane_totals_read_failed",
                    lanes=lanes,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in_s=round(delay, 1),
                )
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 30.0)
