"""The Faust QA stage: asr.transcripts → qa.findings (or qa.dlq).

A thin adapter around the pure rule engine (:mod:`pipeline.qa`). Reads committed
transcripts only; each output joins its input partition's transaction (exactly once),
so each call gets one QAResult. Transcripts are taken in batches (``qa_batch_max`` within
``qa_batch_window_s``) and acknowledged after all of a batch's results are delivered; any error in
a batch halts the stage before one of them is acknowledged, and the restart reads it again. Transcripts are published downstream only in their redacted form, inside
the QAResult.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import faust
from confluent_kafka import KafkaException

from pipeline.adapters.faust_app import (
    abort_open_transactions_on_revoke,
    as_received,
    create_faust_app,
    send_batch_in_source_transactions,
    stop_transactions_of_lost_partitions,
    take_in_batches,
    watch_health,
)
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import CallQAError
from pipeline.logs import get_logger
from pipeline.qa import QAEngine
from pipeline.run.qa_step import TranscriptStep
from pipeline.runtime.health import StageHealth
from pipeline.stages.outputs import Received, Writer
from pipeline.stages.qa import QaOutcome, QaStage
from pipeline.stages.replay_bound import ReplayTally, StopOffsets
from pipeline.stages.sizes import MessageLimits

log = get_logger("callqa.qa")
BOUND_CHECK_S = 2.0


def create_app(settings: Settings, app_id: str = "callqa-qa", health: StageHealth | None = None,
               replay_id: str | None = None, bound: StopOffsets | None = None,
               tally: ReplayTally | None = None, on_done: Callable[[], None] | None = None) -> faust.App:
    """``bound``: a bounded replay; records at or past their partition's stop offset are passed over,
    and ``on_done`` is called once the group has reached every stop offset (see ``tally``)."""
    stage = QaStage(QAEngine.from_paths(list(settings.qa_rule_packs)))  # a bad pack fails here, at start
    app = create_faust_app(settings, app_id)
    retry_name = settings.topic("qa.retry")  # redriven letters: only the group that failed one takes it
    transcripts = app.topic(settings.topic("asr.transcripts"), retry_name, key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw")
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    watch_health(app, health, settings.topic("asr.transcripts"))
    inputs = [settings.topic("asr.transcripts"), retry_name]
    stop_transactions_of_lost_partitions(app, inputs)
    abort_open_transactions_on_revoke(app)
    tally = tally or ReplayTally()
    if bound is not None:
        bound.check_topic(settings.topic("asr.transcripts"))
        _watch_bound(app, settings, app_id, bound, tally, on_done or (lambda: None))

    step = TranscriptStep(stage, Writer(limits, app_id, replay_id, settings.topic), retry_name, bound)

    @app.agent(transcripts)
    async def evaluate(stream: faust.Stream) -> None:
        await take_in_batches(stream, settings.qa_batch_max, settings.qa_batch_window_s, evaluate_batch, "qa")

    async def evaluate_batch(loop: asyncio.AbstractEventLoop, events: list) -> None:
        """Evaluate a batch in turn off the event loop, then send every result with one wait for all."""
        batch = [(event.message, as_received(event)) for event in events
                 if step.wanted(event.message.topic, event.message.partition, event.message.offset, event.headers)]
        # Off the event loop: heavy calls must not stall heartbeats. It never raises.
        timed = await loop.run_in_executor(None, lambda: [_timed(step.evaluate, r) for _, r in batch])
        outcomes = [outcome for outcome, _ in timed]
        planned = [step.plan(outcome, received) for outcome, (_, received) in zip(outcomes, batch)]
        await send_batch_in_source_transactions(app, [
            (msg, [(settings.topic(r.topic), r.key, r.value, r.partition, list(r.headers) or None)
                   for r in records])
            for (msg, _), records in zip(batch, planned) if records], [event.message for event in events])
        for (msg, received), (outcome, took_s), records in zip(batch, timed, planned):
            tally.count(msg.partition)
            step.account(outcome, records, received, time.perf_counter() - took_s)  # logs its own time

    return app


def _timed(evaluate: Callable[[Received], QaOutcome], received: Received) -> tuple[QaOutcome, float]:
    """The outcome and the seconds its evaluation took."""
    started = time.perf_counter()
    outcome = evaluate(received)
    return outcome, time.perf_counter() - started


def _watch_bound(app: faust.App, settings: Settings, group: str, bound: StopOffsets, tally: ReplayTally,
                 on_done: Callable[[], None]) -> None:
    """Every few seconds, on every member: has the whole group reached its stop offsets?"""
    from pipeline.runtime.replay_watch import BoundWatch

    watch = BoundWatch(settings, group, bound)

    @app.timer(interval=BOUND_CHECK_S)
    async def _check_bound() -> None:
        if tally.finished:
            return
        try:  # blocking Kafka reads: off the event loop
            tally.last = await asyncio.get_running_loop().run_in_executor(None, watch.check)
        except (CallQAError, KafkaException) as exc:  # a check that failed is retried, not taken as done
            log.warning("replay_bound_check_failed", group=group, error=str(exc))
            return
        if tally.finished:
            log.info("replay_bound_reached", group=group, stop_at=bound.flag(), processed=tally.processed)
            on_done()
