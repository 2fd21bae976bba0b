"""The one retry layer for object storage: backoff with full jitter until a deadline.

Every store call of the router's probe and the worker's fetch goes through
:class:`RetryingStore`; the MinIO client itself does not retry (urllib3 retries are off
in :func:`pipeline.adapters.minio_store.storage_client`), so an outage is retried here
only. Transient errors (the adapter classifies them: connection refused or reset,
timeouts, 5xx) are retried; permanent ones (a missing object, access denied) fail at
once. Past the deadline the last error is raised as :class:`StorageUnavailable`, which
the stages dead-letter as ``fetch_failed`` (see README "Storage outages").

Sleep and clock are injected, so tests run without sleeping. Pure: no client library.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_random_exponential

from pipeline.events import ObjectRef
from pipeline.stages.storage import NoOutcome, ObjectInfo, ObjectStore, ObjectWriter, OriginalReplacer, StorageError

T = TypeVar("T")


class StorageUnavailable(StorageError):
    """Storage kept failing with transient errors until the retry deadline passed."""

    transient = False  # the deadline is spent: retrying it again would be a second layer


class RetryInterrupted(NoOutcome):
    """The process is stopping while it waited for storage: the call has no outcome (it is read again)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: sleep n is uniform in [0, min(max_sleep_s, first_s * 2**n)]."""

    deadline_s: float = 300.0
    first_s: float = 0.5
    max_sleep_s: float = 10.0


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, StorageError) and exc.transient


def call_with_retry(
    call: Callable[[], T],
    backoff: Backoff,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """``call()`` until it succeeds, fails permanently, or transient failures outlast the deadline.
    ``on_retry(error, attempt, sleep_s)`` is told of each retry (to log it)."""
    deadline_at = clock() + backoff.deadline_s
    jitter = wait_random_exponential(multiplier=backoff.first_s, max=backoff.max_sleep_s)

    def wait(state: RetryCallState) -> float:
        return max(0.0, min(jitter(state), deadline_at - clock()))  # the last sleep ends at the deadline

    def stop(state: RetryCallState) -> bool:
        return clock() >= deadline_at

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None and state.next_action is not None:
            error = state.outcome.exception()
            if error is not None:
                on_retry(error, state.attempt_number, state.next_action.sleep)

    retrying = Retrying(
        sleep=sleep,
        stop=stop,
        wait=wait,
        retry=retry_if_exception(is_transient),
        before_sleep=before_sleep,
        reraise=True,
    )
    started, attempts = clock(), 0

    def counted() -> T:
        nonlocal attempts
        attempts += 1
        return call()

    try:
        return retrying(counted)
    except StorageError as exc:
        if not is_transient(exc):
            raise
        raise StorageUnavailable(
            f"storage unavailable for {clock() - started:.0f} s ({attempts} attempts): {exc}"
        ) from exc


def interruptible_sleep(stopping: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early, raising :class:`RetryInterrupted`, when ``stopping`` is set."""

    def sleep(seconds: float) -> None:
        if stopping.wait(seconds):
            raise RetryInterrupted("stopping while waiting for storage")

    return sleep


class RetryingStore:
    """An :class:`ObjectStore` whose every call is retried by one :class:`Backoff`."""

    def __init__(
        self,
        store: ObjectStore,
        backoff: Backoff,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_retry: Callable[[BaseException, int, float], None] | None = None,
    ) -> None:
        self.store, self.backoff = store, backoff
        self.sleep, self.clock, self.on_retry = sleep, clock, on_retry

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        return self._retry(lambda: self.store.stat(ref))

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        return self._retry(lambda: self.store.read(ref, offset, length))

    def put(
        self, bucket: str, key: str, data: bytes, content_type: str, metadata: dict[str, str] | None = None
    ) -> ObjectInfo:
        """Retried like a read: a put of the same bytes under the same key is safe to repeat."""
        writer = cast(ObjectWriter, self.store)
        return self._retry(lambda: writer.put(bucket, key, data, content_type, metadata))

    def put_if_match(self, ref: ObjectRef, data: bytes, content_type: str, metadata: dict[str, str]) -> ObjectInfo:
        """Retried as well: where a first try was stored but its answer lost, the retry is refused
        (the ETag is now the replacement's) and the caller finds its own mark at the key."""
        replacer = cast(OriginalReplacer, self.store)
        return self._retry(lambda: replacer.put_if_match(ref, data, content_type, metadata))

    def remove_version(self, ref: ObjectRef) -> None:
        """Retried: removing a version that is already gone succeeds."""
        replacer = cast(OriginalReplacer, self.store)
        self._retry(lambda: replacer.remove_version(ref))

    def _retry(self, call: Callable[[], T]) -> T:
        return call_with_retry(call, self.backoff, sleep=self.sleep, clock=self.clock, on_retry=self.on_retry)
