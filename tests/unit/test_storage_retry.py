"""The one storage retry layer (issue 10 item 4): backoff with full jitter up to a deadline,
transient vs permanent errors, and the worker's fetch path on top of it. No real sleeping."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import urllib3
from minio.error import InvalidResponseError, S3Error, ServerError

from pipeline.adapters.fetch import Fetcher
from pipeline.adapters.file_store import FileStore
from pipeline.adapters.minio_store import MinioStore, classify, storage_client
from pipeline.config import Settings
from pipeline.events import ObjectRef, encode
from pipeline.stages.asr import AsrInput, Fetched
from pipeline.stages.outcomes import Dead
from pipeline.stages.retry import (
    Backoff,
    RetryingStore,
    RetryInterrupted,
    StorageUnavailable,
    call_with_retry,
    interruptible_sleep,
)
from pipeline.stages.storage import MissingObject, ObjectInfo, StorageError, StorageRefused
from tests import audio
from tests.unit.test_fetch_limits import routed

REF = ObjectRef(bucket="recordings", key="k.wav")


class FakeClock:
    """time.monotonic and time.sleep in one: sleeping advances the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(errors: list[Exception], result: str = "ok"):  # noqa: ANN201
    """A call that raises each of ``errors`` in turn, then returns ``result``; counts its calls."""
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    call.calls = calls  # type: ignore[attr-defined]
    return call


def test_transient_errors_are_retried_until_success() -> None:
    clock = FakeClock()
    call = failing([StorageError("connection refused")] * 4)
    seen = []
    got = call_with_retry(
        call, Backoff(deadline_s=60), sleep=clock.sleep, clock=clock, on_retry=lambda e, n, s: seen.append(n)
    )
    assert got == "ok" and len(call.calls) == 5 and seen == [1, 2, 3, 4]
    assert len(clock.sleeps) == 4


def test_sleeps_are_full_jitter_under_an_exponential_cap() -> None:
    clock = FakeClock()
    backoff = Backoff(deadline_s=10_000, first_s=0.5, max_sleep_s=8.0)
    call_with_retry(failing([StorageError("x")] * 40), backoff, sleep=clock.sleep, clock=clock)
    caps = [min(8.0, 0.5 * 2**n) for n in range(40)]
    assert all(0 <= s <= cap for s, cap in zip(clock.sleeps, caps, strict=True))
    assert len(set(clock.sleeps)) > 30  # jittered, not a fixed schedule
    assert max(clock.sleeps[10:]) > 4.0  # the cap is reached, not the first step repeated


def test_the_deadline_ends_retries_with_storage_unavailable() -> None:
    clock = FakeClock()
    call = failing([StorageError("503 Service Unavailable")] * 10_000)
    with pytest.raises(StorageUnavailable, match="503") as info:
        call_with_retry(call, Backoff(deadline_s=300, max_sleep_s=10), sleep=clock.sleep, clock=clock)
    assert clock.now - 1000.0 == pytest.approx(300.0)  # the last sleep ends at the deadline, not past it
    assert not info.value.transient  # never retried by a second layer
    assert f"({len(call.calls)} attempts)" in str(info.value)


@pytest.mark.parametrize("error", [MissingObject("NoSuchKey"), StorageRefused("AccessDenied")])
def test_permanent_errors_fail_at_once(error: Exception) -> None:
    clock = FakeClock()
    call = failing([error])
    with pytest.raises(type(error)):
        call_with_retry(call, Backoff(), sleep=clock.sleep, clock=clock)
    assert len(call.calls) == 1 and clock.sleeps == []


def test_a_stopping_process_interrupts_the_wait() -> None:
    stopping = threading.Event()
    stopping.set()
    with pytest.raises(RetryInterrupted):
        call_with_retry(failing([StorageError("down")]), Backoff(), sleep=interruptible_sleep(stopping))


def _s3_error(code: str, status: int) -> S3Error:
    response = urllib3.HTTPResponse(status=status)
    return S3Error(response, code, "m", "/b/k", "r", "h")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (_s3_error("NoSuchKey", 404), MissingObject),
        (_s3_error("AccessDenied", 403), StorageRefused),
        (_s3_error("InternalError", 500), StorageError),
        (_s3_error("SlowDown", 503), StorageError),
        (ServerError("server failed", 503), StorageError),
        (ServerError("bad request", 400), StorageRefused),
        (InvalidResponseError(502, "text/html", "<html>bad gateway</html>"), StorageError),
        (InvalidResponseError(403, "text/html", "<html>forbidden</html>"), StorageRefused),
        (urllib3.exceptions.MaxRetryError(None, "/b/k", ConnectionRefusedError()), StorageError),
        (urllib3.exceptions.ReadTimeoutError(None, "/b/k", "read timed out"), StorageError),
        (urllib3.exceptions.ProtocolError("reset", ConnectionResetError()), StorageError),
        (ConnectionRefusedError(111, "refused"), StorageError),
        (ValueError("bad header"), StorageRefused),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else type(v).__name__,
)
def test_client_errors_are_classified(error: Exception, kind: type) -> None:
    got = classify("read", REF, error)
    assert type(got) is kind
    assert got.transient == (kind is StorageError)


def test_the_minio_client_does_not_retry_itself() -> None:
    retries = storage_client(Settings()).__dict__["_http"].connection_pool_kw["retries"]
    assert retries.total == 0  # pipeline.stages.retry is the only layer


def test_a_refused_connection_is_one_quick_transient_failure() -> None:
    from pipeline.stack.processes import free_port

    store = MinioStore(storage_client(Settings(s3_endpoint=f"127.0.0.1:{free_port()}")))
    with pytest.raises(StorageError) as info:
        store.stat(REF)
    assert info.value.transient


# -- the worker's fetch path on top of it ------------------------------------------------------


class FlakyStore:
    """A file store whose first ``failures`` reads fail like a storage outage."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.inner, self.failures, self.reads = FileStore(), failures, 0
        self.error = error or StorageError("read: MaxRetryError: connection refused")

    def stat(self, ref: ObjectRef) -> ObjectInfo:
        return self.inner.stat(ref)

    def read(self, ref: ObjectRef, offset: int = 0, length: int | None = None) -> bytes:
        self.reads += 1
        if self.reads <= self.failures:
            raise self.error
        return self.inner.read(ref, offset, length)


def _input(path: Path) -> AsrInput[str]:
    return AsrInput.of("tag", encode(routed(path, 2.0)), path.stem.encode())


def test_fetch_waits_out_an_outage_then_succeeds(tmp_path: Path) -> None:
    clock = FakeClock()
    store = FlakyStore(failures=6)
    fetcher = Fetcher(RetryingStore(store, Backoff(deadline_s=300), sleep=clock.sleep, clock=clock))
    [out] = fetcher.fetch([_input(audio.write(tmp_path / "c.wav", 2.0, 8000))])
    assert isinstance(out, Fetched), out
    assert store.reads == 7 and len(clock.sleeps) == 6


def test_fetch_of_a_missing_object_is_dead_lettered_at_once(tmp_path: Path) -> None:
    clock = FakeClock()
    path = audio.write(tmp_path / "gone.wav", 2.0, 8000)
    item = _input(path)
    path.unlink()
    [out] = Fetcher(RetryingStore(FileStore(), Backoff(), sleep=clock.sleep, clock=clock)).fetch([item])
    assert isinstance(out, Dead) and out.letter.reason == "missing_object"
    assert clock.sleeps == []  # no waiting for an object that is not there


def test_fetch_past_the_deadline_is_dead_lettered_as_fetch_failed(tmp_path: Path) -> None:
    clock = FakeClock()
    store = FlakyStore(failures=10**9)
    fetcher = Fetcher(RetryingStore(store, Backoff(deadline_s=120), sleep=clock.sleep, clock=clock))
    [out] = fetcher.fetch([_input(audio.write(tmp_path / "c.wav", 2.0, 8000))])
    assert isinstance(out, Dead) and out.letter.reason == "fetch_failed"
    assert "storage unavailable for 120 s" in out.letter.message
    assert clock.now - 1000.0 == pytest.approx(120.0)


# -- the router's probe on top of it ------------------------------------------------------------


def test_the_router_probe_waits_out_an_outage_then_routes(tmp_path: Path) -> None:
    from pipeline.stages.router import ArrivalRouter, Routed
    from tests.unit.test_probe_routing import BUCKETS, _arrival

    clock = FakeClock()
    store = FlakyStore(failures=5)
    router = ArrivalRouter(
        store=RetryingStore(store, Backoff(deadline_s=300), sleep=clock.sleep, clock=clock),
        buckets=BUCKETS,
        partitions_of=lambda b: 4,
        max_duration_s=3600,
    )
    out = router.route(_arrival(audio.write(tmp_path / "c.wav", 2.0, 8000)), b"k", {})
    assert isinstance(out, Routed) and out.call.bucket == "short"
    assert len(clock.sleeps) == 5


def test_the_router_dead_letters_a_missing_object_at_once(tmp_path: Path) -> None:
    from pipeline.stages.router import ArrivalRouter
    from tests.unit.test_probe_routing import BUCKETS, _arrival

    clock = FakeClock()
    router = ArrivalRouter(
        store=RetryingStore(FileStore(), Backoff(), sleep=clock.sleep, clock=clock),
        buckets=BUCKETS,
        partitions_of=lambda b: 4,
        max_duration_s=3600,
    )
    out = router.route(_arrival(tmp_path / "never-stored.wav"), b"k", {})
    assert isinstance(out, Dead) and out.letter.reason == "missing_object" and clock.sleeps == []


def test_a_file_rewritten_after_routing_is_object_changed_not_fetched(tmp_path: Path) -> None:
    """Embedded mode's counterpart of tests/integration/test_object_changed.py: the routed call
    carries the file's sha256, and the fetch (a whole read) checks it."""
    from pipeline.stages.router import ArrivalRouter, Routed
    from tests.unit.test_probe_routing import BUCKETS, _arrival

    path = audio.write(tmp_path / "c.wav", 2.0, 8000)
    router = ArrivalRouter(store=FileStore(), buckets=BUCKETS, partitions_of=lambda b: 4, max_duration_s=3600)
    out = router.route(_arrival(path), b"k", {})
    assert isinstance(out, Routed) and out.call.object.etag
    audio.write(path, 2.0, 8000, silent=True)  # the same header, other samples
    [fetched] = Fetcher(FileStore()).fetch([AsrInput.of("tag", encode(out.call), b"k")])
    assert isinstance(fetched, Dead), fetched
    assert fetched.letter.reason == "object_changed" and out.call.object.etag in fetched.letter.message
