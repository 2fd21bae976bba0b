"""The Faust router: audio.arrivals → audio.bucket.<name> (or router.dlq).

A thin adapter around :class:`pipeline.stages.router.ArrivalRouter`. Several router
processes share the arrival partitions (one consumer group); the app runs with
``processing_guarantee="exactly_once"``.

De-duplication: every routed object version leaves a marker on the compacted topic
``router.seen``, produced in the same transaction as the RoutedCall and the input
offset (see :func:`pipeline.adapters.faust_app.send_batch_in_source_transactions`), so a killed
router re-routes nothing twice and loses nothing. A Faust Table was tried first:
its changelog writes committed in a transaction of their own, and a SIGKILL test
then lost 35 of 300 arrivals (marked seen, never routed). Arrivals of one object land
on one partition (keyed ``bucket/object``; upstream publishers use MinIO's partitioner, see
:mod:`pipeline.adapters.publisher`), and its marker goes to the same partition number of
``router.seen``: a router loads the marker partitions of the arrivals partitions it is
assigned, when they are assigned (:mod:`pipeline.run.router_markers`). In memory, a marker
sent counts at once but is kept only once Faust reports the commit of the transaction holding
it (:func:`pipeline.adapters.faust_app.on_commit`); a revoke forgets the others, since their
transaction may abort and its arrivals come again (they must route, not be skipped).

Several arrivals in flight: the agent takes arrivals in batches (``router_batch_max`` within
``router_batch_window_s``), probes a batch's objects at once on ``router_probe_threads`` threads,
decides them in arrival order (the de-dup, including two arrivals of one object in the batch,
and the partition choice: :meth:`pipeline.run.router_step.ArrivalStep.decide_batch`), queues
every output into its arrival's partition transaction and awaits all deliveries once. Faust
acknowledges a batch's events only after that (``take_events``), so no offset is committed
ahead of its outputs, and a failed send halts before any of them is acknowledged; so does any
other error in a batch (Faust would acknowledge and skip all its events; every routing failure
is a letter already, so this is a bug or a lost broker, and the restart reads the batch again).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import faust

from pipeline.adapters.faust_app import (
    abort_open_transactions_on_revoke,
    as_received,
    create_faust_app,
    on_commit,
    send_batch_in_source_transactions,
    stop_transactions_of_lost_partitions,
    take_in_batches,
    watch_health,
)
from pipeline.adapters.minio_store import retrying_store
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import StackError
from pipeline.headers import PartitionProgress
from pipeline.run.router_lanes import LaneTotals
from pipeline.run.router_markers import MarkerLoader
from pipeline.run.router_step import ArrivalStep
from pipeline.runtime.health import StageHealth
from pipeline.stages.markers import MarkerSet, check_co_partitioned
from pipeline.stages.outputs import SEEN, Writer
from pipeline.stages.router import ArrivalRouter
from pipeline.stages.routing import Buckets
from pipeline.stages.sizes import MessageLimits
from pipeline.stages.storage import ObjectStore


def create_app(settings: Settings, app_id: str = "callqa-router", health: StageHealth | None = None,
               store: ObjectStore | None = None) -> faust.App:
    """Build the Faust app; ``app.main()`` or ``app.worker`` runs it. ``store``: the object store
    probed (default MinIO behind the retry layer; a load test passes the simulated one)."""
    # First, so that security settings the stage cannot honour stop it before any client connects.
    app = create_faust_app(settings, app_id)
    arrivals_name = settings.arrivals
    bucket_names = {b: settings.topic(f"audio.bucket.{b}") for b in settings.bucket_names}
    seen_topic = settings.topic("router.seen")
    retry_name = settings.topic("router.retry")  # redriven letters, co-partitioned like the markers
    # Read once at start: partitions added later are used after a restart.
    partition_counts = topic_partitions(settings, [*bucket_names.values(), arrivals_name, seen_topic, retry_name])
    check_co_partitioned(partition_counts, arrivals_name, seen_topic)
    check_co_partitioned(partition_counts, arrivals_name, retry_name)
    # One agent over both: Faust assigns co-partitioned topics by partition number together, so
    # the router owning arrivals partition p (and its markers) also takes router.retry partition p.
    arrivals = app.topic(arrivals_name, retry_name, key_type=bytes, value_type=bytes,
                         key_serializer="raw", value_serializer="raw")
    limits = MessageLimits.from_catalog(load_catalog(settings.bucket_names))
    markers = MarkerLoader(settings, seen_topic, arrivals_name)  # identity of a routed object version → when
    # Progress stamps on routed calls (what `callqa lag` reads), totals per arrivals partition (lane)
    # taken up from the bucket topics on assignment.
    progress = PartitionProgress()
    lanes = LaneTotals(settings, list(bucket_names.values()), arrivals_name, progress)
    watch_health(app, health, arrivals_name)
    stop_transactions_of_lost_partitions(app, [arrivals_name, retry_name])
    abort_open_transactions_on_revoke(app)

    on_commit(app, markers.on_committed)  # a marker is known once the transaction holding it committed

    @app.on_partitions_revoked.connect
    async def _revoked(sender: object, revoked: set, **_: object) -> None:
        markers.on_revoked(revoked)
        lanes.on_revoked(revoked)

    @app.on_partitions_assigned.connect
    async def _assigned(sender: object, assigned: set, **_: object) -> None:
        # Both read in the background; the agent waits for each partition's.
        markers.on_assigned(assigned)
        lanes.on_assigned(assigned)

    router = ArrivalRouter(
        # Probes wait out a storage outage (up to storage_retry_deadline_s) in the executor thread:
        # the event loop, its heartbeats and health timer keep turning meanwhile.
        store=store or retrying_store(settings),
        buckets=Buckets(settings.bucket_edges_s, settings.bucket_names),
        partitions_of=lambda bucket: partition_counts[bucket_names[bucket]],
        max_duration_s=settings.max_duration_s,
        accept_buckets=frozenset([settings.recordings_bucket]),
    )

    step = ArrivalStep(router, Writer(limits, app_id, None, settings.topic), progress, retry_name)

    # The probes' own threads: the default executor also runs marker reads and progress recovery.
    probes = ThreadPoolExecutor(settings.router_probe_threads, thread_name_prefix="router-probe")

    @app.agent(arrivals)
    async def route(stream: faust.Stream) -> None:
        await take_in_batches(stream, settings.router_batch_max, settings.router_batch_window_s, route_batch, "router")

    async def route_batch(loop: asyncio.AbstractEventLoop, events: list) -> None:
        """Route one batch of events: probes at once, decisions in order, one wait for all sends."""
        started = time.perf_counter()
        batch = [(event.message, as_received(event)) for event in events
                 if step.wanted(event.message.topic, event.headers)]  # else a redrive for another router group
        seen_of: dict[int, MarkerSet] = {}
        for msg, _ in batch:
            if msg.partition not in seen_of:  # routing waits until the partition's markers and totals are in
                seen_of[msg.partition] = await markers.seen(msg.partition)
                await lanes.ready(msg.partition)
        inspected = await asyncio.gather(*(
            loop.run_in_executor(probes, step.inspect, received, seen_of[msg.partition])
            for msg, received in batch))
        decided = step.decide_batch([(r, i) for (_, r), i in zip(batch, inspected)], seen_of)
        # Pending until committed; noted before the batch is acknowledged, so no commit can cover
        # an arrival whose marker it does not know yet.
        for (msg, _), (_, records) in zip(batch, decided):
            for record in records:
                if record.topic == SEEN and record.key is not None:
                    markers.sent(msg.partition, record.key.decode(), msg.offset)
        # Every routed call and marker in its arrival's transaction; one wait for all deliveries.
        await send_batch_in_source_transactions(app, [
            (msg, [(settings.topic(r.topic), r.key, r.value, r.partition, list(r.headers) or None)
                   for r in records])
            for (msg, _), (_, records) in zip(batch, decided) if records], [event.message for event in events])
        for (_, received), (outcome, records) in zip(batch, decided):
            step.account(outcome, records, received, started)

    return app


def topic_partitions(settings: Settings, names: list[str]) -> dict[str, int]:
    from pipeline.adapters.kafka_admin import admin_client

    topics = admin_client(settings).list_topics(timeout=30).topics
    missing = [n for n in names if n not in topics]
    if missing:
        raise StackError(f"topics missing (run: callqa topics apply): {missing}")
    return {n: len(topics[n].partitions) for n in names}
