"""The pure commit bookkeeping: generations per partition and a floor that never goes back."""

from __future__ import annotations

from pipeline.stages.checkpoint import Checkpoint

P0, P1 = ("t", 0), ("t", 1)


def test_a_revocation_makes_earlier_stamps_stale_even_after_reassignment() -> None:
    cp = Checkpoint()
    cp.assign([P0, P1])
    old = [cp.stamp("t", 0, 4), cp.stamp("t", 1, 7)]
    cp.revoke([P0])
    assert not cp.is_current(old[0])
    cp.assign([P0])
    assert not cp.is_current(old[0]) and cp.is_current(old[1])
    assert cp.is_current(cp.stamp("t", 0, 4))
    plan = cp.plan(old)
    assert (plan.offsets, plan.keep, plan.stale) == ({P1: 8}, frozenset({("t", 1, 7)}), 1)


def test_a_partition_not_assigned_is_never_committed() -> None:
    cp = Checkpoint()
    assert cp.plan([cp.stamp("t", 0, 1)]).offsets == {}


def test_committed_offsets_only_move_forward() -> None:
    cp = Checkpoint()
    cp.assign([P0])
    cp.committed(cp.plan([cp.stamp("t", 0, 9), cp.stamp("t", 0, 5)]))
    plan = cp.plan([cp.stamp("t", 0, 3), cp.stamp("t", 0, 9), cp.stamp("t", 0, 10)])
    assert (plan.offsets, plan.behind) == ({P0: 11}, 2)
    cp.committed(plan)
    assert cp.plan([cp.stamp("t", 0, 10)]).offsets == {}
