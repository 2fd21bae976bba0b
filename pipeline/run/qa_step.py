"""The Faust QA stage's per-event handling, without Faust: one transcript in, the records to write out.

:class:`TranscriptStep` holds what the agent in :mod:`pipeline.run.qa` does with an event
between reading it and writing it: pass over a redrive for another group and records past
a bounded replay's stop offsets, evaluate it (:class:`~pipeline.stages.qa.QaStage`), plan
its records (:func:`~pipeline.stages.outputs.plan_evaluated`, which the embedded runner uses
as well), and count and log the outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import Counter

from pipeline.headers import HeadersLike
from pipeline.logs import get_logger
from pipeline.run.step_frame import bound_to_source, dead_record, is_own_redrive
from pipeline.stages.outputs import Received, Record, Writer, plan_evaluated
from pipeline.stages.qa import Evaluated, QaOutcome, QaStage
from pipeline.stages.replay_bound import StopOffsets

log = get_logger("callqa.qa")
EVALUATED = Counter("callqa_qa_calls_total", "Calls evaluated")
FINDINGS = Counter("callqa_qa_findings_total", "Findings", ["rule_id", "severity"])
DEAD = Counter("callqa_qa_dead_lettered_total", "Transcripts dead-lettered")


@dataclass
class TranscriptStep:
    stage: QaStage
    writer: Writer  # the QA group's: limits, group name (app id), replay id, physical topic names
    retry_topic: str  # physical name of qa.retry
    bound: StopOffsets | None = None  # a bounded replay

    def wanted(self, topic: str, partition: int, offset: int, headers: HeadersLike) -> bool:
        """False for a redrive addressed to another QA group (a replay's, or the live one's), and in a
        bounded replay for a record that arrived after it started: passed over, it is still
        acknowledged, so the group's committed offset moves past it and the bound counts as reached."""
        if not is_own_redrive(topic, headers, self.retry_topic, self.writer.group):
            return False
        return self.bound is None or self.bound.keeps(topic, partition, offset)

    def evaluate(self, received: Received) -> QaOutcome:
        """Blocking (a heavy call takes a while; it never raises): the agent runs it in an executor."""
        return self.stage.evaluate_payload(received.payload, received.key, received.source, self.writer.replay_id)

    def plan(self, outcome: QaOutcome, received: Received) -> list[Record]:
        return plan_evaluated(outcome, received, self.writer)

    def handle(self, received: Received) -> list[Record]:
        """Evaluate, plan and account in one call (what the agent does, in this thread)."""
        started = time.perf_counter()
        outcome = self.evaluate(received)
        records = self.plan(outcome, received)
        self.account(outcome, records, received, started)
        return records

    def account(self, outcome: QaOutcome, records: list[Record], received: Received, started: float) -> None:
        logger = bound_to_source(log, received)
        dead = dead_record(records)
        if dead is not None and dead.letter is not None:
            letter = dead.letter
            DEAD.inc()
            logger.warning("transcript_dead_lettered", reason=letter.reason, message=letter.message)
            return
        assert isinstance(outcome, Evaluated)
        result = outcome.result
        EVALUATED.inc()
        for f in result.findings:
            FINDINGS.labels(f.rule_id, f.severity).inc()
        logger.info("call_evaluated", call_id=result.call_id, score=result.score,
                    findings=len(result.findings), pii=len(result.pii),
                    ms=round((time.perf_counter() - started) * 1000, 2))
