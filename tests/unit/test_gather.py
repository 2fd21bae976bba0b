"""Gathering a micro-batch: the window on an injected clock, the budget, leftovers, revocations."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.batching import BatchBudget
from pipeline.events import encode
from pipeline.stages.checkpoint import Checkpoint
from pipeline.stages.gather import Gatherer
from tests.fakes import TOPIC, FakeClock, FakeMessage, routed


def message(partition: int, offset: int, duration_s: float = 10.0) -> FakeMessage:
    return FakeMessage(TOPIC, partition, offset, encode(routed(f"c{partition}-{offset}", duration_s)))


@dataclass
class Source:
    """Delivers scripted message lists, one per consume call; each call takes ``step_s`` of clock time."""

    deliveries: list[list[FakeMessage]]
    step_s: float = 0.02
    clock: FakeClock = field(default_factory=FakeClock)
    timeouts: list[float] = field(default_factory=list)

    def consume(self, max_messages: int, timeout_s: float) -> list[FakeMessage]:
        self.timeouts.append(round(timeout_s, 6))
        self.clock.t += self.step_s
        return self.deliveries.pop(0) if self.deliveries else []


def gatherer(source: Source, max_items: int = 4, max_audio_s: float = 1000.0) -> Gatherer[FakeMessage]:
    return Gatherer(source.consume, Checkpoint(), BatchBudget(max_items, max_audio_s), window_ms=50, clock=source.clock)


def test_the_window_closes_after_50_ms_with_what_arrived() -> None:
    source = Source([[message(0, 0)], [], [message(0, 1)], [message(0, 2)]])
    batch = gatherer(source).gather()
    # three consume calls of 20 ms fit in the window; the fourth delivery waits for the next batch
    assert [q.input.call.call_id for q in batch] == ["c0-0", "c0-1"]
    assert source.timeouts == [0.05, 0.03, 0.01]


def test_a_full_batch_does_not_wait_for_the_window() -> None:
    source = Source([[message(0, i) for i in range(4)], [message(0, 9)]])
    batch = gatherer(source, max_items=4).gather()
    assert len(batch) == 4 and len(source.timeouts) == 1


def test_calls_beyond_the_audio_budget_wait_in_order() -> None:
    source = Source([[message(0, 0, 40.0), message(0, 1, 40.0), message(0, 2, 40.0)]])
    g = gatherer(source, max_items=4, max_audio_s=90.0)
    assert [q.position.offset for q in g.gather()] == [0, 1]
    assert [q.position.offset for q in g.gather()] == [2]


def test_a_revocation_drops_waiting_messages_of_that_partition_only() -> None:
    source = Source([[message(0, 0), message(1, 0), message(0, 1), message(1, 1), message(0, 2)]])
    g = gatherer(source, max_items=2)
    g.gather()
    g.drop([(TOPIC, 0)])
    assert [(q.position.partition, q.position.offset) for q in g.pending] == [(1, 1)]


def test_an_undecodable_message_is_gathered_and_costs_no_audio() -> None:
    source = Source([[FakeMessage(TOPIC, 0, 0, b"garbage"), message(0, 1)]])
    batch = gatherer(source, max_items=2).gather()
    assert batch[0].input.call is None and "not JSON" in (batch[0].input.error or "")
    assert batch[0].duration_s == 0.0 and batch[1].input.call is not None


def test_messages_are_stamped_with_their_partition_generation() -> None:
    source = Source([[message(0, 0)], [message(0, 1)]])
    checkpoint = Checkpoint()
    g = Gatherer(source.consume, checkpoint, BatchBudget(1, 100.0), window_ms=50, clock=source.clock)
    first = g.gather()[0].position
    checkpoint.revoke([(TOPIC, 0)])
    second = g.gather()[0].position
    assert (first.generation, second.generation) == (0, 1)


def test_a_batch_takes_the_partitions_in_turns_and_the_next_batch_starts_after_it() -> None:
    # all of partition 0's backlog arrived first, as librdkafka hands out one partition's fetch at a time
    source = Source([[message(0, i) for i in range(4)] + [message(1, i) for i in range(4)] + [message(2, 0)]])
    g = gatherer(source, max_items=4)
    taken = [(q.position.partition, q.position.offset) for q in g.gather()]
    assert taken == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert [(q.position.partition, q.position.offset) for q in g.gather()] == [(1, 1), (0, 2), (1, 2), (0, 3)]
    assert g.waiting() == {(TOPIC, 1): 1}


def stereo_message(partition: int, offset: int, duration_s: float) -> FakeMessage:
    call = routed(f"c{partition}-{offset}", duration_s).model_copy(
        update={"channels": 2, "roles": {"0": "agent", "1": "customer"}}
    )
    return FakeMessage(TOPIC, partition, offset, encode(call))


def test_a_batch_holds_at_most_its_window_cap_and_a_call_over_it_alone() -> None:
    # a 250 s stereo call is estimated at 5 windows a channel: 10 windows
    calls = [stereo_message(0, i, 250.0) for i in range(8)] + [stereo_message(0, 8, 3000.0)]
    source = Source([calls])
    g = Gatherer(
        source.consume, Checkpoint(), BatchBudget(16, 1800.0), window_ms=50, clock=source.clock, max_windows=64
    )
    sizes = [len(g.gather()) for _ in range(4)]
    # the audio budget alone takes 7 calls (70 windows: a model batch of 64 and one of 6)
    assert sizes == [6, 2, 1, 0]
    assert g.window_budget is not None


def test_without_a_window_cap_the_audio_budget_alone_decides() -> None:
    source = Source([[stereo_message(0, i, 250.0) for i in range(8)]])
    g = Gatherer(source.consume, Checkpoint(), BatchBudget(16, 1800.0), window_ms=50, clock=source.clock)
    assert len(g.gather()) == 7
