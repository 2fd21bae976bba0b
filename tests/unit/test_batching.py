"""The pure batch planner: buckets, budget, determinism, padding accounting."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from pipeline.batching import BatchBudget, BatchPlanError, PaddingTally, bucket_for, plan_batches, plan_mixed


@dataclass(frozen=True)
class Item:
    name: str
    duration_s: float


def items(*durations: float) -> list[Item]:
    return [Item(f"i{n}", d) for n, d in enumerate(durations)]


def test_budget_decides_full_and_admits():
    budget = BatchBudget(max_items=3, max_audio_s=60)
    assert budget.admits(0, 0, 500)  # an empty batch takes anything
    assert budget.admits(2, 30, 30) and not budget.admits(2, 40, 30) and not budget.admits(3, 0, 1)
    assert budget.is_full(3, 10) and budget.is_full(1, 60) and not budget.is_full(2, 59)
    assert budget.items_for(30) == 2 and budget.items_for(10) == 3 and budget.items_for(100) == 1


def test_invalid_budget_is_rejected():
    with pytest.raises(BatchPlanError):
        BatchBudget(max_items=0, max_audio_s=10)


def test_plan_groups_by_bucket_and_respects_budget():
    plan = plan_batches(items(3, 25, 18, 4, 29, 9, 12), BatchBudget(max_items=2, max_audio_s=100), (10, 20, 30))
    assert [(b.padded_s, sorted(i.duration_s for i in b.items)) for b in plan] == [
        (30, [25, 29]),
        (20, [12, 18]),
        (10, [4, 9]),
        (10, [3]),
    ]
    assert all(len(b.items) <= 2 and b.computed_s <= 100 for b in plan)


def test_every_item_planned_exactly_once_and_deterministic():
    rng = random.Random(7)
    pool = items(*(rng.uniform(0.5, 30) for _ in range(200)))
    budget = BatchBudget(max_items=16, max_audio_s=240)
    plan = plan_batches(pool, budget, (10, 20, 30))
    planned = [i for b in plan for i in b.items]
    assert sorted(planned, key=lambda i: i.name) == sorted(pool, key=lambda i: i.name)
    assert plan == plan_batches(list(reversed(pool)), budget, (10, 20, 30))
    assert all(b.computed_s <= 240 for b in plan)


def test_without_buckets_items_cost_their_duration():
    plan = plan_batches(items(50, 50, 50, 700), BatchBudget(max_items=10, max_audio_s=120))
    assert [len(b.items) for b in plan] == [1, 2, 1]  # the 700 s item alone, then 2 + 1
    assert all(b.padding_efficiency == 1.0 for b in plan)


def test_padding_efficiency_accounting():
    plan = plan_batches(items(5, 10, 15), BatchBudget(max_items=8, max_audio_s=1000), (30,))
    assert plan[0].padding_efficiency == pytest.approx(30 / 90)
    tally = PaddingTally()
    for batch in plan:
        tally.add(batch)
    assert tally.efficiency == pytest.approx(30 / 90) and tally.batch_sizes == [3]


def test_item_longer_than_largest_bucket_is_an_error():
    with pytest.raises(BatchPlanError):
        bucket_for(31, (10, 20, 30))
    assert bucket_for(30, (10, 20, 30)) == 30 and bucket_for(10.0000000001, (10, 20, 30)) == 10


def test_mixed_plan_keeps_each_items_bucket_longest_first():
    budget = BatchBudget(max_items=4, max_audio_s=100)
    plan = plan_mixed(items(3, 25, 18, 4, 29, 9, 12), budget, (10, 20, 30), budget.items_for)
    # capacity(30) = 3 rows (100 s / 30 s); the next batch starts at 20 s and holds 4
    assert [[i.duration_s for i in b.items] for b in plan] == [[29, 25, 18], [12, 9, 4, 3]]
    assert [b.buckets_s for b in plan] == [(30, 30, 20), (20, 10, 10, 10)]
    assert [b.padded_s for b in plan] == [30, 20]
    assert plan[1].computed_s == 50 and plan[1].audio_s == 28
    assert [(bucket, list(rows)) for bucket, rows in plan[1].groups()] == [(20, [0]), (10, [1, 2, 3])]


def test_mixed_plan_caps_a_batch_by_its_longest_items_capacity():
    budget = BatchBudget(max_items=8, max_audio_s=60)
    # capacity(30) = 2 rows, although four 10 s items would fit the audio budget next to a 30 s one
    plan = plan_mixed(items(28, 9, 9, 9, 9), budget, (10, 20, 30), budget.items_for)
    assert [len(b.items) for b in plan] == [2, 3]
    assert all(b.computed_s <= 60 for b in plan)


def test_mixed_plan_rejects_an_item_past_the_largest_bucket():
    budget = BatchBudget(max_items=4, max_audio_s=100)
    with pytest.raises(BatchPlanError):
        plan_mixed(items(31), budget, (10, 20, 30), budget.items_for)
