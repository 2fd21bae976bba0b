"""The routing stage as a plain object: one arrival in, one outcome out.

decode → (skip foreign buckets, non-creations and the redaction stage's replaced originals) → stat →
(skip replaced originals the event did not show) → de-duplicate → probe →
validate → bucket + partition → RoutedCall. In two halves, so that a router can probe several
arrivals at once and still decide in arrival order: :meth:`ArrivalRouter.inspect` (everything
that reads storage; any thread) and :meth:`ArrivalRouter.decide` (the de-dup against what
routed before and the partition choice, which depend on order; one event at a time).
:meth:`ArrivalRouter.route` is both in a row. Every failure becomes a DeadLetter with a
reason code; nothing raises out of :meth:`ArrivalRouter.route`: whatever the store raises
is ``fetch_failed`` and an unexpected error (a bug) is ``internal_error``, so an adapter
never skips an input silently.
Used by the Faust router and by the embedded runner alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Literal

from pipeline.errors import DecodeError, SkipEvent
from pipeline.events import (
    AudioArrived,
    DeadLetter,
    ObjectRef,
    ReasonCode,
    RoutedCall,
    SourcePosition,
    UnsupportedSchemaVersion,
    decode_arrival,
)
from pipeline.stages.outcomes import Dead
from pipeline.stages.probe import (
    HEAD_BYTES,
    AudioInfo,
    NeedsFullRead,
    ProbeError,
    probe_full,
    probe_head,
    validate,
)
from pipeline.stages.replaced_originals import is_redacted_original
from pipeline.stages.routing import (
    Buckets,
    PartitionBalancer,
    RoutingError,
    call_id_for,
    parse_roles,
)
from pipeline.stages.storage import MissingObject, ObjectChanged, ObjectStore, StorageError, storage_call


@dataclass(frozen=True)
class Routed:
    call: RoutedCall
    partition: int
    dedup_key: str


# redacted_original: the redaction stage's replacement of a recording it redacted
# (redact_replace_original): already transcribed, as the original it replaced.
SkipReason = Literal["not_creation", "foreign_bucket", "duplicate", "redacted_original"]


@dataclass(frozen=True)
class Skipped:
    why: SkipReason


Outcome = Routed | Dead[None] | Skipped


@dataclass(frozen=True)
class Probed:
    """An arrival whose object was read and validated, its call built; left to decide: whether it
    routed before (``dedup_key``) and the partition, both in arrival order."""

    call: RoutedCall
    dedup_key: str


Inspected = Probed | Dead[None] | Skipped


class SeenInBatch:
    """The de-dup check for a batch of one arrivals partition: the markers known before the
    batch, plus the identities whose markers earlier arrivals of the batch produced.

    Arrivals of one batch are probed together against the markers as they were before it, so
    an object that arrives twice in one batch passes that check twice; deciding in arrival
    order against this set routes the first and skips the second, as one at a time would.
    Kept apart from the marker table: a revoke mid-batch drops the table's pending markers,
    but both arrivals are in one transaction (they commit or abort together), so the second
    must still be skipped.
    """

    def __init__(self, before: Container[str]) -> None:
        self.before = before
        self.produced: set[str] = set()

    def __contains__(self, identity: object) -> bool:
        return identity in self.produced or identity in self.before

    def add(self, identity: str) -> None:
        self.produced.add(identity)


@dataclass
class ArrivalRouter:
    store: ObjectStore
    buckets: Buckets
    partitions_of: Callable[[str], int]  # bucket name -> partition count of its topic
    max_duration_s: float
    full_read_cap_bytes: int = 512 * 1024 * 1024
    accept_buckets: frozenset[str] | None = None  # storage buckets we route; None = all
    balancer: PartitionBalancer = field(default_factory=PartitionBalancer)

    def route(
        self,
        payload: bytes,
        key: bytes | None,
        seen: Container[str],
        source: SourcePosition | None = None,
        generation: int = 0,
    ) -> Outcome:
        """Route one arrival. ``seen`` holds the identities already routed (the de-dup markers);
        the caller records ``Routed.dedup_key`` in it once the output is committed.
        ``generation`` > 0 re-routes a version already routed: a replay has its own identity."""
        return self.decide(self.inspect(payload, key, seen, source, generation), seen)

    def decide(self, inspected: Inspected, seen: Container[str]) -> Outcome:
        """The order-dependent half: a probed arrival already in ``seen`` is a duplicate; else it
        takes the partition with the least audio so far. Call in arrival order, one at a time."""
        if not isinstance(inspected, Probed):
            return inspected
        call = inspected.call
        if inspected.dedup_key in seen:
            return Skipped("duplicate")
        partition = self.balancer.choose(call.bucket, self.partitions_of(call.bucket), call.duration_s)
        return Routed(call, partition, inspected.dedup_key)

    def inspect(
        self,
        payload: bytes,
        key: bytes | None,
        seen: Container[str],
        source: SourcePosition | None = None,
        generation: int = 0,
    ) -> Inspected:
        """The storage half (stat, probe; blocking, safe to run for several arrivals at once):
        ``seen`` spares the probe of a version routed before; :meth:`decide` checks again."""

        def dead(reason: ReasonCode, message: str) -> Dead[None]:
            return Dead(
                DeadLetter.of(payload=payload, key=key, reason=reason, message=message, stage="router", source=source)
            )

        try:
            arrival = decode_arrival(payload)
            if self.accept_buckets is not None and arrival.object.bucket not in self.accept_buckets:
                return Skipped("foreign_bucket")
            if is_redacted_original(arrival.metadata):  # MinIO's event carries the object's user metadata
                return Skipped("redacted_original")
            return self._inspect(arrival, seen, generation)
        except SkipEvent:
            return Skipped("not_creation")
        except UnsupportedSchemaVersion as exc:
            return dead("unsupported_schema", str(exc))
        except DecodeError as exc:
            return dead("malformed_event", str(exc))
        except ProbeError as exc:
            return dead(exc.reason, str(exc))
        except MissingObject as exc:
            return dead("missing_object", str(exc))
        except ObjectChanged as exc:  # written again between stat and probe: that write has its own arrival
            return dead("object_changed", str(exc))
        except StorageError as exc:
            return dead("fetch_failed", str(exc))
        except RoutingError as exc:
            return dead("malformed_event", str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must not cost the input: keep it in the DLQ
            return dead("internal_error", f"{type(exc).__name__}: {exc}")

    def _inspect(self, arrival: AudioArrived, seen: Container[str], generation: int = 0) -> Inspected:
        info = storage_call(self.store.stat, arrival.object)
        if is_redacted_original(info.metadata):  # an upstream event without the metadata: the object has it
            return Skipped("redacted_original")
        # Content identity: a re-put of unchanged bytes is a new version with the same etag.
        ref = ObjectRef(
            bucket=arrival.object.bucket,
            key=arrival.object.key,
            version_id=info.version_id or arrival.object.version_id,
            etag=info.etag or arrival.object.etag,
            size_bytes=info.size_bytes,
        )
        dedup_key = ref.identity + (f"~g{generation}" if generation else "")
        if dedup_key in seen:
            return Skipped("duplicate")
        started = time.perf_counter()
        audio = validate(self._probe(ref, info.size_bytes), self.max_duration_s)
        probe_ms = (time.perf_counter() - started) * 1000
        metadata = {**info.metadata, **arrival.metadata}
        bucket = self.buckets.bucket_for(audio.duration_s)
        call = RoutedCall(
            call_id=call_id_for(ref.key, metadata),
            object=ref,
            bucket=bucket,
            duration_s=audio.duration_s,
            sample_rate_hz=audio.sample_rate_hz,
            channels=audio.channels,
            frames=audio.frames,
            container=audio.container,
            codec=audio.codec,
            roles=parse_roles(metadata.get("roles"), audio.channels),
            agent_id=metadata.get("agent-id"),
            metadata=metadata,
            probe_ms=round(probe_ms, 3),
            replay_id=f"gen{generation}" if generation else None,
        )
        return Probed(call, dedup_key)

    def _probe(self, ref: ObjectRef, size_bytes: int) -> AudioInfo:
        if size_bytes == 0:
            raise ProbeError("empty_object", "the object is empty")
        head = storage_call(self.store.read, ref, 0, min(HEAD_BYTES, size_bytes))
        try:
            return probe_head(head, size_bytes)
        except NeedsFullRead:
            pass
        if size_bytes > self.full_read_cap_bytes:
            raise ProbeError(
                "too_long", f"{size_bytes} bytes needs a full read, above the {self.full_read_cap_bytes}-byte cap"
            )
        return probe_full(head if len(head) >= size_bytes else storage_call(self.store.read, ref))
