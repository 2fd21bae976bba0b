"""The Faust router: audio.arrivals → audio.bucket.<name> (or router.dlq).

A thin adapter around :class:`pipeline.stages.router.ArrivalRouter`. Several router
processes share the arrival partitions (one consumer group); the app runs with
``processing_guarantee="exactly_once"``.

De-duplication: every routed object version leaves a marker on the compacted topic
``router.seen``, produced in the same transaction as the RoutedCall and the input
offset (see :func:`pipeline.adapters.faust_app.send_all_in_source_transaction`), so a killed
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
"""

from __future__ import annotations

import asyncio
import time

import faust

from pipeline.adapters.faust_app import (
    create_faust_app,
    on_commit,
    send_all_in_source_transaction,
    stop_transactions_of_lost_partitions,
    watch_health,
)
from pipeline.adapters.minio_store import retrying_store
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.errors import StackError
from pipeline.events import SourcePosition
from pipeline.run.router_markers import MarkerLoader
from pipeline.run.router_step import ArrivalStep
from pipeline.runtime.health import StageHealth
from pipeline.runtime.lag_kafka import recover_progress
from pipeline.stages.markers import check_co_partitioned
from pipeline.stages.outputs import SEEN, Received, Writer
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
    # Progress stamps on routed calls (what `callqa lag` reads); totals resume from the topics.
    progress = recover_progress(settings, list(bucket_names.values()))
    watch_health(app, health, arrivals_name)
    for name in (arrivals_name, retry_name):
        stop_transactions_of_lost_partitions(app, name)

    on_commit(app, markers.on_committed)  # a marker is known once the transaction holding it committed

    @app.on_partitions_revoked.connect
    async def _markers_revoked(sender: object, revoked: set, **_: object) -> None:
        markers.on_revoked(revoked)

    @app.on_partitions_assigned.connect
    async def _markers_assigned(sender: object, assigned: set, **_: object) -> None:
        markers.on_assigned(assigned)  # reads in the background; the agent waits for each partition

    @app.on_partitions_assigned.connect
    async def _recover(sender: object, assigned: set, **_: object) -> None:
        # Arrivals moved between routers: take up totals another router may have advanced.
        await asyncio.get_running_loop().run_in_executor(
            None, recover_progress, settings, list(bucket_names.values()), progress)

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

    @app.agent(arrivals)
    async def route(stream: faust.Stream) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            msg = event.message
            if not step.wanted(msg.topic, event.headers):
                continue  # a redrive for another router group
            started = time.perf_counter()
            received = Received(event.value, event.key,
                                SourcePosition(topic=msg.topic, partition=msg.partition, offset=msg.offset),
                                event.headers)
            seen = await markers.seen(msg.partition)  # routing waits until the partition's markers are in
            outcome = await loop.run_in_executor(None, step.route, received, seen)
            records = step.plan(outcome, received)
            if records:  # a routed call and its marker: in the arrival's transaction, one wait for both deliveries
                await send_all_in_source_transaction(app, msg, [
                    (settings.topic(r.topic), r.key, r.value, r.partition, list(r.headers) or None) for r in records])
            for record in records:
                if record.topic == SEEN and record.key is not None:
                    markers.sent(msg.partition, record.key.decode(), msg.offset)  # pending until committed
            step.account(outcome, records, received, started)

    return app


def topic_partitions(settings: Settings, names: list[str]) -> dict[str, int]:
    from pipeline.adapters.kafka_admin import admin_client

    topics = admin_client(settings).list_topics(timeout=30).topics
    missing = [n for n in names if n not in topics]
    if missing:
        raise StackError(f"topics missing (run: callqa topics apply): {missing}")
    return {n: len(topics[n].partitions) for n in names}
