"""The Faust router's per-event handling, without Faust: one arrival in, the records to write out.

:class:`ArrivalStep` holds what the agent in :mod:`pipeline.run.router` does with an event
between reading it and writing it: pass over a redrive for another group, route it
(:class:`~pipeline.stages.router.ArrivalRouter`), plan its records
(:func:`~pipeline.stages.outputs.plan_route`, which the embedded runner uses as well), and
count and log the outcome. So it is tested with the same failure table as the other runners.

A batch of arrivals (:meth:`ArrivalStep.inspect` for each, concurrently, then
:meth:`ArrivalStep.decide_batch` once, in arrival order) gives what the same arrivals one at a
time would: an object that arrives twice in the batch is routed once (:class:`SeenInBatch`),
and partitions are chosen in arrival order.
"""

from __future__ import annotations

import time
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from pipeline.events import DeadLetter
from pipeline.headers import REPLAY_GENERATION, HeadersLike, PartitionProgress, int_header
from pipeline.logs import get_logger
from pipeline.run.step_frame import bound_to_source, dead_record, is_own_redrive
from pipeline.stages.outcomes import Dead
from pipeline.stages.outputs import SEEN, Received, Record, Writer, plan_route
from pipeline.stages.router import ArrivalRouter, Inspected, Outcome, Routed, SeenInBatch, Skipped

log = get_logger("callqa.router")

ROUTED = Counter("callqa_router_routed_total", "Recordings routed", ["bucket"])
DEAD = Counter("callqa_router_dead_lettered_total", "Arrivals dead-lettered", ["reason"])
SKIPPED = Counter("callqa_router_skipped_total", "Arrivals skipped", ["why"])
AUDIO_S = Counter("callqa_router_audio_seconds_total", "Audio seconds routed", ["bucket"])
PROBE_S = Histogram("callqa_router_probe_seconds", "Probe latency",
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5))


@dataclass
class ArrivalStep:
    router: ArrivalRouter
    writer: Writer  # the router group's: limits, group name (app id), physical topic names
    progress: PartitionProgress  # stamps on routed calls (what `callqa lag` reads)
    retry_topic: str  # physical name of router.retry

    def wanted(self, topic: str, headers: HeadersLike) -> bool:
        """False for a redrive addressed to another router group."""
        return is_own_redrive(topic, headers, self.retry_topic, self.writer.group)

    def route(self, received: Received, seen: Container[str]) -> Outcome:
        """Blocking (probes read storage): the agent runs it in an executor."""
        generation = int_header(received.headers, REPLAY_GENERATION)
        return self.router.route(received.payload, received.key, seen, received.source, generation)

    def inspect(self, received: Received, seen: Container[str]) -> Inspected:
        """The storage half of :meth:`route` (blocking; several at once in the agent's probe threads)."""
        generation = int_header(received.headers, REPLAY_GENERATION)
        return self.router.inspect(received.payload, received.key, seen, received.source, generation)

    def decide_batch(
        self, batch: Sequence[tuple[Received, Inspected]], seen_of: Mapping[int, Container[str]]
    ) -> list[tuple[Outcome, list[Record]]]:
        """Outcomes and records of a batch, decided in arrival order, as one at a time would be:
        each arrival is checked against its partition's markers (``seen_of``, by source partition)
        and the markers planned for the arrivals before it in the batch (-1: an arrival without a source)."""
        in_batch = {p: SeenInBatch(seen) for p, seen in seen_of.items()}
        results = []
        for received, inspected in batch:
            seen = in_batch[received.source.partition if received.source else -1]
            outcome = self._decide(inspected, seen, received)
            records = self.plan(outcome, received)
            for record in records:
                if record.topic == SEEN and record.key is not None:
                    seen.add(record.key.decode())
            results.append((outcome, records))
        return results

    def _decide(self, inspected: Inspected, seen: Container[str], received: Received) -> Outcome:
        try:
            return self.router.decide(inspected, seen)
        except Exception as exc:  # noqa: BLE001 - raised into the agent, Faust would ack the whole batch
            return Dead(DeadLetter.of(payload=received.payload, key=received.key, reason="internal_error",
                                      message=f"{type(exc).__name__}: {exc}", stage="router", source=received.source))

    def plan(self, outcome: Outcome, received: Received) -> list[Record]:
        """The records for an outcome; progress stamps advance here, on the event loop, one event at a time."""
        return plan_route(outcome, received, self.writer, self.progress.stamp, time.time())

    def account(self, outcome: Outcome, records: list[Record], received: Received, started: float) -> None:
        """Metrics and a log line for what was written."""
        bound = bound_to_source(log, received)
        dead = dead_record(records)
        if dead is not None and dead.letter is not None:
            letter = dead.letter
            DEAD.labels(letter.reason).inc()
            bound.warning("arrival_dead_lettered", reason=letter.reason, message=letter.message[:2000],
                          letter_bytes=len(dead.value))
        elif isinstance(outcome, Routed):
            call = outcome.call
            ROUTED.labels(call.bucket).inc()
            AUDIO_S.labels(call.bucket).inc(call.duration_s)
            PROBE_S.observe(call.probe_ms / 1000)
            bound.info("call_routed", call_id=call.call_id, bucket=call.bucket,
                       out_partition=outcome.partition, duration_s=round(call.duration_s, 2),
                       probe_ms=call.probe_ms, total_ms=round((time.perf_counter() - started) * 1000, 2))
        elif isinstance(outcome, Skipped):
            SKIPPED.labels(outcome.why).inc()
            if outcome.why == "redacted_original":  # rare and worth a line: a recording was written over
                bound.info("arrival_skipped", why=outcome.why)
            else:
                bound.debug("arrival_skipped", why=outcome.why)
