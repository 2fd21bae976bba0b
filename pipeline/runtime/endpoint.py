"""A stage process's operational surface: the HTTP endpoint, the build-info metric and the
backlog gauges refreshed on a timer (so an idle or stuck consumer does not leave them stale)."""

from __future__ import annotations

import threading

from prometheus_client import Gauge, Info

from pipeline.config import Settings
from pipeline.events import SCHEMA_VERSION
from pipeline.logs import get_logger
from pipeline.runtime.health import StageHealth
from pipeline.runtime.versions import package_version

log = get_logger("callqa.ops")

BUILD = Info("callqa_build", "Package, model and event-schema versions of this stage process")
BACKLOG_AUDIO = Gauge("callqa_backlog_audio_seconds", "Audio seconds a stage's group has not yet consumed",
                      ["stage", "group"])
BACKLOG_MESSAGES = Gauge("callqa_backlog_messages", "Messages a stage's group has not yet consumed",
                         ["stage", "group"])
ASSIGNED = Gauge("callqa_assigned_partitions", "Input partitions assigned to this process (group membership)",
                 ["stage"])
LOOP_AGE = Gauge("callqa_loop_age_seconds", "Seconds since the stage's loop last turned", ["stage"])
BACKLOG_AGE = Gauge("callqa_backlog_refreshed_timestamp_seconds", "When the backlog gauges were last refreshed",
                    ["stage", "group"])


def start_endpoint(settings: Settings, stage: str, specs: list | None = None,
                   model_version: str | None = None) -> StageHealth:
    """The stage's health state; serves it (and /metrics) when ``metrics_port`` is set."""
    health = StageHealth.from_settings(stage, settings)
    BUILD.info({"version": package_version(), "schema": SCHEMA_VERSION, "stage": stage,
                "model": settings.asr_model, "model_version": model_version or "n/a"})
    ASSIGNED.labels(stage).set_function(lambda: len(health.partitions()))
    LOOP_AGE.labels(stage).set_function(lambda: health.liveness().detail["last_beat_age_s"] or 0.0)
    if settings.metrics_port is None:
        return health
    from pipeline.runtime.http import serve

    server = serve(settings.metrics_host, settings.metrics_port, health)
    log.info("metrics_serving", host=settings.metrics_host, port=server.server_port, stage=stage)
    if specs:
        BacklogGauges(settings, specs).start()
    return health


class BacklogGauges(threading.Thread):
    """Every ``backlog_interval_s``: read the groups' backlog (cheaply, see pipeline.runtime.lag_kafka)."""

    def __init__(self, settings: Settings, specs: list) -> None:
        super().__init__(name="backlog-gauges", daemon=True)
        self.settings, self.specs = settings, specs
        self.stopping = threading.Event()

    def run(self) -> None:
        import time

        from pipeline.runtime.lag_kafka import OffsetsReader

        reader = OffsetsReader(self.settings)
        try:
            while not self.stopping.is_set():
                try:
                    rows = reader.backlog(self.specs)
                except Exception as exc:  # noqa: BLE001 - a broker hiccup must not kill the stage
                    log.warning("backlog_refresh_failed", error=str(exc))
                else:
                    for spec in self.specs:
                        mine = [r for r in rows if r.group == spec.group and r.topic == spec.topic]
                        BACKLOG_MESSAGES.labels(spec.stage, spec.group).set(sum(r.messages for r in mine))
                        if all(r.audio_s is not None for r in mine):
                            BACKLOG_AUDIO.labels(spec.stage, spec.group).set(sum(r.audio_s for r in mine))
                        BACKLOG_AGE.labels(spec.stage, spec.group).set(time.time())
                self.stopping.wait(self.settings.backlog_interval_s)
        finally:
            reader.close()
