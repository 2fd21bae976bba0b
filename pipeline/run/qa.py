"""The Faust QA stage: asr.transcripts → qa.findings (or qa.dlq).

A thin adapter around the pure rule engine (:mod:`pipeline.qa`). Reads committed
transcripts only; each output joins its input partition's transaction (exactly once),
so each call gets one QAResult. Transcripts are published downstream only in their redacted form, inside
the QAResult.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

import faust
from confluent_kafka import KafkaException
from prometheus_client import Counter

from pipeline.adapters.faust_app import (
    abort_open_transactions_on_revoke,
    create_faust_app,
    send_in_source_transaction,
    stop_transactions_of_lost_partitions,
    watch_health,
)
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import CallQAError
from pipeline.events import SourcePosition, encode
from pipeline.logs import get_logger
from pipeline.ops.dlq import stamped
from pipeline.ops.headers import addressed_to
from pipeline.ops.health import StageHealth
from pipeline.qa import QAEngine
from pipeline.stages.outcomes import Dead
from pipeline.stages.qa import Evaluated, QaOutcome, QaStage
from pipeline.stages.replay_bound import ReplayTally, StopOffsets
from pipeline.stages.sizes import MessageLimits, too_large_letter

log = get_logger("callqa.qa")
EVALUATED = Counter("callqa_qa_calls_total", "Calls evaluated")
FINDINGS = Counter("callqa_qa_findings_total", "Findings", ["rule_id", "severity"])
DEAD = Counter("callqa_qa_dead_lettered_total", "Transcripts dead-lettered")


def output_of(outcome: QaOutcome, key: bytes | None, limits: MessageLimits | None = None) -> tuple[
        Literal["findings", "dlq"], bytes | None, bytes]:
    """Where an outcome goes: (qa.findings or qa.dlq, key, value); a letter is cut to fit qa.dlq."""
    if isinstance(outcome, Evaluated):
        return "findings", outcome.result.call_id.encode(), encode(outcome.result)
    return "dlq", key, limits.letter("qa.dlq", key, outcome.letter) if limits else encode(outcome.letter)


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
    findings = app.topic(settings.topic("qa.findings"), key_serializer="raw", value_serializer="raw")
    dlq = app.topic(settings.topic("qa.dlq"), key_serializer="raw", value_serializer="raw")
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    watch_health(app, health, settings.topic("asr.transcripts"))
    for name in (settings.topic("asr.transcripts"), retry_name):
        stop_transactions_of_lost_partitions(app, name)
        abort_open_transactions_on_revoke(app, name)
    tally = tally or ReplayTally()
    if bound is not None:
        bound.check_topic(settings.topic("asr.transcripts"))
        _watch_bound(app, settings, app_id, bound, tally, on_done or (lambda: None))

    @app.agent(transcripts)
    async def evaluate(stream: faust.Stream) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            msg = event.message
            if msg.topic == retry_name and not addressed_to(event.headers, app_id):
                continue  # a redrive for another QA group (a replay's, or the live one's)
            if bound is not None and not bound.keeps(msg.topic, msg.partition, msg.offset):
                # Arrived after the replay started. Passed over, it is still acknowledged, so
                # the group's committed offset moves past it and the bound counts as reached.
                continue
            logger = log.bind(topic=msg.topic, partition=msg.partition, offset=msg.offset)
            source = SourcePosition(topic=msg.topic, partition=msg.partition, offset=msg.offset)
            started = time.perf_counter()
            # Off the event loop: a heavy call must not stall heartbeats. It never raises.
            outcome = await loop.run_in_executor(None, stage.evaluate_payload, event.value, event.key, source,
                                                 replay_id)
            where, key, value = output_of(outcome, event.key, limits)
            if where == "findings" and not limits.fits("qa.findings", key, value):
                outcome = Dead(too_large_letter(stage="qa", topic=findings.get_topic_name(), size_bytes=len(value),
                                                limit_bytes=limits.limit("qa.findings"), payload=event.value,
                                                key=event.key, source=source))
            if isinstance(outcome, Dead):  # who failed it, its attempts and headers (for a redrive)
                outcome = Dead(stamped(outcome.letter, event.headers, app_id, replay_id))
                where, key, value = output_of(outcome, event.key, limits)
            topic = findings if where == "findings" else dlq
            await send_in_source_transaction(app, msg, topic.get_topic_name(), key, value)
            tally.count(msg.partition)
            if isinstance(outcome, Dead):
                DEAD.inc()
                logger.warning("transcript_dead_lettered", reason=outcome.letter.reason, message=outcome.letter.message)
                continue
            result = outcome.result
            EVALUATED.inc()
            for f in result.findings:
                FINDINGS.labels(f.rule_id, f.severity).inc()
            logger.info("call_evaluated", call_id=result.call_id, score=result.score,
                       findings=len(result.findings), pii=len(result.pii),
                       ms=round((time.perf_counter() - started) * 1000, 2))

    return app


def _watch_bound(app: faust.App, settings: Settings, group: str, bound: StopOffsets, tally: ReplayTally,
                 on_done: Callable[[], None]) -> None:
    """Every few seconds, on every member: has the whole group reached its stop offsets?"""
    from pipeline.ops.replay_kafka import BoundWatch

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
