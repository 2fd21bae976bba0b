"""Prometheus metrics and the one-line batch summary of an ASR worker."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram

from pipeline.asr import BatchStats
from pipeline.logs import get_logger

log = get_logger("callqa.worker")

_BATCHES = Counter("callqa_asr_batches_total", "Call batches transcribed", ["bucket"])
_CALLS = Counter("callqa_asr_calls_total", "Calls transcribed (committed)", ["bucket"])
_DEAD = Counter("callqa_asr_dead_lettered_total", "Calls dead-lettered", ["bucket"])
_ABORTS = Counter("callqa_asr_transaction_aborts_total", "Aborted transactions", ["bucket"])
_AUDIO_S = Counter("callqa_asr_audio_seconds_total", "Audio seconds transcribed", ["bucket"])
_BUSY_S = Counter("callqa_asr_engine_busy_seconds_total", "Seconds the engine computed", ["bucket"])
_WAIT_S = Counter("callqa_asr_storage_wait_seconds_total", "Seconds the engine waited on storage", ["bucket"])
_FILL = Histogram("callqa_asr_batch_calls", "Calls per batch (batch fill)", ["bucket"], buckets=(1, 2, 4, 8, 16, 32, 64))
_PADDING = Gauge("callqa_asr_padding_efficiency_ratio", "Speech seconds / padded seconds computed, last batch", ["bucket"])
_RTFX = Gauge("callqa_asr_rtfx_ratio", "Audio seconds per wall second (RTFx), last batch", ["bucket"])
_LAG = Gauge("callqa_asr_consumer_lag_messages", "Messages behind the high watermark, after a commit", ["bucket", "partition"])
# kind: allocated, reserved (after the last batch), limit (the device's memory, set at start)
_MEMORY = Gauge("callqa_asr_device_memory_bytes", "Device memory after the last batch, and its limit",
                ["bucket", "kind"])


class WorkerMetrics:
    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self.aborts = _ABORTS.labels(bucket)
        self.storage_wait_s = _WAIT_S.labels(bucket)

    def memory_limit(self, limit_bytes: int) -> None:
        _MEMORY.labels(self.bucket, "limit").set(limit_bytes)

    def observe_batch(self, ready: Sequence, stats: Sequence[BatchStats], wall_s: float) -> None:
        audio_s = sum(r.call.duration_s for r in ready)
        computed = sum(s.computed_s for s in stats)
        padding = sum(s.speech_s for s in stats) / computed if computed else 1.0
        _BATCHES.labels(self.bucket).inc()
        _AUDIO_S.labels(self.bucket).inc(audio_s)
        _BUSY_S.labels(self.bucket).inc(wall_s)
        _FILL.labels(self.bucket).observe(len(ready))
        _PADDING.labels(self.bucket).set(padding)
        _RTFX.labels(self.bucket).set(audio_s / wall_s if wall_s else 0.0)
        if stats:
            _MEMORY.labels(self.bucket, "allocated").set(stats[-1].memory_allocated_bytes)
            _MEMORY.labels(self.bucket, "reserved").set(stats[-1].memory_reserved_bytes)
        log.info("batch_transcribed", bucket=self.bucket, calls=len(ready), audio_s=round(audio_s, 2),
                 model_batches=len(stats), padding_efficiency=round(padding, 3), wall_s=round(wall_s, 3),
                 rtfx=round(audio_s / wall_s, 2) if wall_s else None,
                 memory_allocated=stats[-1].memory_allocated_bytes if stats else None)

    def lag(self, partition: int, messages: int) -> None:
        _LAG.labels(self.bucket, str(partition)).set(messages)

    def committed(self, calls: int, dead: int) -> None:
        _CALLS.labels(self.bucket).inc(calls)
        _DEAD.labels(self.bucket).inc(dead)
