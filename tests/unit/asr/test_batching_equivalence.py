"""Batched decoding gives the same text as one window at a time; over-size batches are split."""

from __future__ import annotations

import pytest

from pipeline.asr import AsrError, Engine, EngineOptions
from pipeline.batching import BatchBudget
from tests.unit.asr.conftest import ENGINE_OPTIONS


def texts(results):
    return [[(s.role, s.start_s, s.text) for s in r.segments] for r in results]


def test_batched_equals_one_at_a_time(engine, en_calls, zh_calls, en_batched, zh_run):
    zh_batched, zh_stats = zh_run
    assert max(b.items for b in zh_stats) > 1
    picks = [0, 3, 6]  # one-at-a-time is slow on CPU: a sample of each set
    batched = [texts(en_batched)[i] for i in picks] + [texts(zh_batched)[i] for i in picks]
    single = [texts([engine.transcribe(c)])[0] for c in [en_calls[i] for i in picks] + [zh_calls[i] for i in picks]]
    assert batched == single


def test_mixed_language_batch_equals_separate_batches(engine, en_calls, zh_calls, en_batched, zh_batched):
    mixed = engine.transcribe_batch(en_calls[1:3] + zh_calls[1:3])
    assert max(b.items for b in engine.last_batch_stats) == 4
    assert texts(mixed) == texts(en_batched[1:3]) + texts(zh_batched[1:3])


def test_window_count_over_pool_shape_is_split_not_crashed(zh_calls, zh_batched):
    small = Engine.load(EngineOptions(**{**ENGINE_OPTIONS.__dict__, "max_batch_items": 2}))
    assert all(small.pool.capacity(b) == 2 for b in small.buckets_s)
    with pytest.raises(AsrError):
        small.pool.audio(small.buckets_s[0], 3)
    # a budget larger than the pool (e.g. changed at run time) plans 7 windows in one batch
    small.budget = BatchBudget(max_items=64, max_audio_s=10_000.0)
    results = small.transcribe_batch(zh_calls[:5])
    assert [b.items for b in small.last_batch_stats] == [2, 2, 1]
    assert texts(results) == texts(zh_batched[:5])


def test_finished_rows_stop_costing_compute(zh_run):
    stats = zh_run[1]
    full_cost = sum(b.items * b.decode_steps for b in stats)
    assert sum(b.decode_row_steps for b in stats) < full_cost
    assert sum(b.compactions for b in stats) >= 1


def test_batch_stats_report_padding_and_memory(engine, en_batched):
    stats = engine.stats.batches
    assert stats and all(0 < b.padding_efficiency <= 1 for b in stats)
    assert all(b.bucket_s in engine.buckets_s for b in stats)
    assert all(b.memory_allocated_bytes > 0 and b.memory_reserved_bytes >= b.memory_allocated_bytes for b in stats)
