"""The worker with fake Kafka clients: gathering within the window, commit, revocation and recovery.
(The `worker` fixture is in tests/unit/conftest.py, the fakes in tests/fakes.py.)"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipeline.events import ObjectRef, Transcript, decode, encode
from pipeline.run.worker import AsrWorker
from pipeline.run.worker_commit import REWIND_ATTEMPTS
from tests.fakes import (
    TOPIC,
    FakeConsumer,
    FakeMessage,
    FakeProducer,
    FencedMessage,
    assign,
    fetch,
    produced,
    revoke,
    routed,
)


def test_a_batch_revoked_and_reassigned_before_commit_is_dropped(worker: AsrWorker) -> None:
    assign(worker, 0)
    batch = fetch(worker, (0, 5), (0, 6))
    revoke(worker, 0)  # another member may process offsets 5-6 meanwhile
    assign(worker, 0)  # ... and the partition comes back before our commit
    assert worker._commit(*batch)
    assert worker.committer.producer.produced == [] and worker.committer.producer.offsets == []


def test_only_the_revoked_partition_of_a_batch_is_dropped(worker: AsrWorker) -> None:
    assign(worker, 0, 1)
    batch = fetch(worker, (0, 5), (1, 9))
    revoke(worker, 1)
    assign(worker, 1)
    assert worker._commit(*batch)
    assert worker.committer.producer.offsets == [(0, 6)]
    assert produced(worker) == ["c0-5"]


def test_a_commit_never_moves_an_offset_backwards(worker: AsrWorker) -> None:
    assign(worker, 0)
    assert worker._commit(*fetch(worker, (0, 5), (0, 6)))
    assert worker.committer.producer.offsets == [(0, 7)]
    # A message below what is committed (a late re-delivery) is neither produced nor committed again.
    assert worker._commit(*fetch(worker, (0, 3)))
    assert worker.committer.producer.offsets == [(0, 7)] and produced(worker) == ["c0-5", "c0-6"]


def test_a_partition_revoked_while_paused_is_fetched_again_when_it_comes_back(worker: AsrWorker) -> None:
    tp0 = [TopicPartition(TOPIC, 0)]
    assign(worker, 0)
    worker.consumer.pause(tp0)  # a batch computes
    revoke(worker, 0)  # the partition leaves meanwhile: the resume skips it
    assign(worker, 0)  # a member died, the partition is back
    worker.consumer.queue.append(FakeMessage(TOPIC, 0, 5, encode(routed("back"))))
    inflight = worker._prefetch()  # the fake consumer, as librdkafka, delivers nothing from a paused partition
    assert inflight is not None, "partition 0 is still paused: its messages are never fetched"
    assert worker._commit(inflight.result(), worker._transcribe(inflight.result().prepared))
    assert produced(worker) == ["back"] and worker.committer.producer.offsets == [(0, 6)]


def test_an_undecodable_event_is_dead_lettered_in_the_batch_transaction(worker: AsrWorker) -> None:
    assign(worker, 0)
    worker.consumer.queue += [FakeMessage(TOPIC, 0, 1, b"{not json"), FakeMessage(TOPIC, 0, 2, encode(routed("ok")))]
    inflight = worker._prefetch().result()
    assert worker._commit(inflight, worker._transcribe(inflight.prepared))
    producer = worker.committer.producer
    assert [t for t, _, _ in producer.produced] == [worker.output_topic, worker.dlq_topic]
    assert producer.offsets == [(0, 3)]


def test_an_abortable_commit_failure_aborts_rewinds_and_forgets_what_waits(worker: AsrWorker) -> None:
    assign(worker, 0)
    worker.consumer.committed_offsets[(TOPIC, 0)] = 5
    batch = fetch(worker, (0, 5), (0, 6))
    worker.gatherer.add(FakeMessage(TOPIC, 0, 7, encode(routed("waiting"))))
    producer = worker.committer.producer
    producer.fail_commit = "abortable"
    assert not worker._commit(*batch)
    assert (producer.aborts, producer.produced, producer.offsets) == (1, [], [])
    assert worker.consumer.seeks == [(0, 5)] and not worker.gatherer.pending
    assert worker.committer.producer is producer
    # The redelivered batch commits normally.
    assert worker._commit(*fetch(worker, (0, 5), (0, 6)))
    assert producer.offsets == [(0, 7)] and produced(worker) == ["c0-5", "c0-6"]


def test_a_fatal_commit_failure_replaces_the_producer(worker: AsrWorker) -> None:
    assign(worker, 0)
    first = worker.committer.producer
    first.fail_commit = "fatal"
    assert not worker._commit(*fetch(worker, (0, 0)))
    assert worker.committer.producer is not first and first.aborts == 0
    assert worker.consumer.seeks == [(0, 0)]  # nothing committed yet: from the start


def test_two_messages_of_one_call_id_in_a_batch_each_get_their_transcript(worker: AsrWorker) -> None:
    assign(worker, 0)
    a, b = routed("call"), routed("call").model_copy(update={"object": ObjectRef(bucket="b", key="other/call.wav")})
    worker.consumer.queue += [FakeMessage(TOPIC, 0, 0, encode(a)), FakeMessage(TOPIC, 0, 1, encode(b))]
    inflight = worker._prefetch().result()
    assert worker._commit(inflight, worker._transcribe(inflight.prepared))
    produced = [decode(v, Transcript) for t, _, v in worker.committer.producer.produced if t == worker.output_topic]
    assert [(t.call_id, t.object.key) for t in produced] == [("call", "call.wav"), ("call", "other/call.wav")]
    assert all(t.redacted for t in produced)  # no clear-text PII on asr.transcripts


def test_a_rewind_survives_a_broker_that_is_still_down(worker: AsrWorker) -> None:
    calls = {"committed": 0}

    def committed(partitions, timeout):
        calls["committed"] += 1
        if calls["committed"] <= 2:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
        return [TopicPartition(TOPIC, 0, 7)]

    assign(worker, 0)
    worker.consumer.committed = committed  # type: ignore[method-assign]
    worker.committer.recover(
        KafkaException(KafkaError(KafkaError._TRANSPORT, "commit failed", txn_requires_abort=True))
    )
    assert worker.consumer.seeks == [(0, 7)] and calls["committed"] == 3


def test_a_rewind_that_keeps_failing_rejoins_with_a_fresh_consumer(worker: AsrWorker) -> None:
    """After a broker restart the consumer's committed() timed out on every try (its session had
    expired, the group was empty): the worker must not retry it for ever."""
    calls = {"committed": 0}

    def committed(partitions, timeout):
        calls["committed"] += 1
        if calls["committed"] > REWIND_ATTEMPTS:
            worker.stopping.set()  # retrying for ever: end the loop so the test fails instead of hanging
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get committed offsets: Local: Timed out"))

    assign(worker, 0)
    stuck, fresh = worker.consumer, FakeConsumer()
    stuck.committed = committed  # type: ignore[method-assign]

    def new_consumer() -> None:
        worker.consumer = worker.committer.consumer = fresh

    worker._new_consumer = new_consumer  # type: ignore[method-assign]
    batch = fetch(worker, (0, 5))
    worker.committer.producer.fail_commit = "abortable"
    assert not worker._commit(*batch)
    assert calls["committed"] == REWIND_ATTEMPTS and stuck.seeks == []
    assert stuck.closed and worker.consumer is fresh and worker.committer.consumer is fresh
    assert worker.committer.producer.produced == [] and worker.committer.producer.offsets == []


def test_a_fatal_consumer_error_rejoins_with_a_fresh_consumer_and_drops_the_batch_in_flight(
    worker: AsrWorker,
) -> None:
    assign(worker, 0)
    batch = fetch(worker, (0, 5))
    fenced, fresh = worker.consumer, FakeConsumer()

    def new_consumer() -> None:
        worker.consumer = worker.committer.consumer = fresh

    worker._new_consumer = new_consumer  # type: ignore[method-assign]
    fenced.queue.append(FencedMessage())  # type: ignore[arg-type]
    assert worker.gatherer.gather() == []
    assert fenced.closed and worker.consumer is fresh and worker.committer.consumer is fresh
    assert worker._commit(*batch)  # from the fenced member: neither produced nor committed
    assert worker.committer.producer.produced == [] and worker.committer.producer.offsets == []


def test_while_a_batch_computes_arrivals_wait_and_a_partition_with_a_batch_waiting_is_held_back(
    worker: AsrWorker,
) -> None:
    from concurrent.futures import Future

    assign(worker, 0, 1)
    cap = worker.opts.max_calls  # 4
    arriving = [FakeMessage(TOPIC, 0, i, encode(routed(f"a{i}"))) for i in range(cap)]
    arriving.append(FakeMessage(TOPIC, 1, 0, encode(routed("b0"))))
    waiting: Future[str] = Future()

    def poll(timeout: float) -> FakeMessage | None:  # the batch computes until all has arrived
        if arriving:
            return arriving.pop(0)
        waiting.set_result("computed")
        return None

    worker.consumer.poll = poll  # type: ignore[assignment]
    assert worker._wait_polling(waiting) == "computed"
    assert worker.gatherer.waiting() == {(TOPIC, 0): cap, (TOPIC, 1): 1}
    assert worker.consumer.paused == {(TOPIC, 0)}  # a batch's worth waits there; partition 1 is still read
    batch = worker.gatherer.gather()
    worker._hold_back()
    # the batch takes the partitions in turns, and partition 0, half drained, is read again
    assert [(q.position.partition, q.position.offset) for q in batch] == [(0, 0), (1, 0), (0, 1), (0, 2)]
    assert worker.consumer.paused == set()


def test_a_replaced_producer_is_closed_without_blocking_the_worker(worker: AsrWorker) -> None:
    import threading

    release = threading.Event()

    class HangingClose(FakeProducer):
        def close(self) -> bool:  # as a producer stuck in a hung transactional call
            release.wait(10)
            return super().close()

    assign(worker, 0)
    first = worker.committer.producer = HangingClose()
    first.fail_commit = "fatal"
    assert not worker._commit(*fetch(worker, (0, 0)))  # returns while the old producer's close hangs
    assert worker.committer.producer is not first and not hasattr(first, "closed")
    release.set()
    [closing] = worker.committer.closing
    closing.join(5)
    assert first.closed and not closing.is_alive()
    worker.committer.close()  # at shutdown: the current producer too
    assert worker.committer.producer.closed and worker.committer.closing == []
