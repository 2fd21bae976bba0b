"""De-dup markers are known only after their transaction commits (issue 26 item 12), on real Kafka.

The router's marker bookkeeping (:class:`pipeline.run.router_markers.MarkerLoader`) with its
real inputs: markers written to ``router.seen`` in real transactions, some committed, one
aborted after the partition was revoked (what a new owner's producer does to the old owner's
open transaction), and the catch-up read on the re-assignment. Forcing a Faust rebalance
between a send and Faust's commit is a race of milliseconds, so the router's calls are made
here in its order: ``sent`` after the marker's send, ``on_committed`` when Faust reports a
commit, ``on_revoked`` / ``on_assigned`` from its rebalance signals.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Producer
from faust.types import TP

from pipeline.config import Settings
from pipeline.run.router_markers import MarkerLoader

pytestmark = pytest.mark.integration


def transactional(settings: Settings) -> Producer:
    producer = Producer({**settings.kafka_common(), "transactional.id": f"test-markers-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    return producer


def test_a_marker_of_a_transaction_aborted_after_a_revoke_is_not_seen_and_a_committed_one_is(
    settings: Settings,
) -> None:
    seen_topic, arrivals = settings.topic("router.seen"), settings.arrivals
    p0 = TP(arrivals, 0)

    async def scenario() -> None:
        loader = MarkerLoader(settings, seen_topic, arrivals)
        loader.on_assigned([p0])
        await asyncio.wait_for(loader.seen(0), 120)
        producer = transactional(settings)

        def marker(identity: str) -> None:  # the router's send of a marker, in the arrival's transaction
            producer.produce(seen_topic, key=identity.encode(), value=b"1764570000.0", partition=0)

        producer.begin_transaction()
        marker("rec/x.wav#ex")
        loader.sent(0, "rec/x.wav#ex", arrival_offset=5)
        producer.commit_transaction(30)
        loader.on_committed({p0: 6})  # Faust's commit of arrivals offsets up to 5

        producer.begin_transaction()
        marker("rec/y.wav#ey")
        producer.flush(30)
        loader.sent(0, "rec/y.wav#ey", arrival_offset=6)
        assert "rec/y.wav#ey" in await loader.seen(0)  # a second arrival in this transaction is a duplicate
        loader.on_revoked([p0])  # revoked before Faust committed it
        producer.abort_transaction(30)  # what the new owner's producer does to it

        loader.on_assigned([p0])  # the partition comes back: a catch-up read of router.seen
        seen = await asyncio.wait_for(loader.seen(0), 120)
        assert "rec/x.wav#ex" in seen
        assert "rec/y.wav#ey" not in seen  # arrival 6 is delivered again: it must route, not be skipped

        producer.begin_transaction()  # a transaction open across a revoke that does commit
        marker("rec/w.wav#ew")
        producer.flush(30)
        loader.sent(0, "rec/w.wav#ew", arrival_offset=7)
        loader.on_revoked([p0])  # forgotten here...
        producer.commit_transaction(30)
        loader.on_assigned([p0])
        seen = await asyncio.wait_for(loader.seen(0), 120)
        assert "rec/w.wav#ew" in seen and "rec/x.wav#ex" in seen  # ...read back: arrival 7 again is a duplicate
        assert "rec/y.wav#ey" not in seen

    asyncio.run(scenario())
