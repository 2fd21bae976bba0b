"""Reads a busy or fresh cluster refuses for a moment are retried; others fail at once, named."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from pipeline.errors import StackError
from pipeline.runtime.kafka_retry import retrying


def failing(codes: list[int], value: int = 7):
    calls = []

    def read() -> int:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1]))
        return value

    return read, calls


def test_not_leader_and_no_coordinator_yet_are_read_again() -> None:
    read, calls = failing([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NOT_COORDINATOR])
    assert retrying(read, "end offsets", timeout_s=5, pause_s=0) == 7
    assert len(calls) == 3


def test_a_restarted_brokers_leader_epochs_are_read_again() -> None:
    read, calls = failing([KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH])
    assert retrying(read, "low offsets", timeout_s=5, pause_s=0) == 7
    assert len(calls) == 3


def test_a_lasting_refusal_ends_in_a_stack_error_naming_the_read() -> None:
    read, calls = failing([KafkaError.LEADER_NOT_AVAILABLE] * 1000)
    with pytest.raises(StackError, match="cannot read end offsets"):
        retrying(read, "end offsets", timeout_s=0.05, pause_s=0.01)
    assert len(calls) > 1


def test_an_error_that_is_not_retriable_is_raised_at_once() -> None:
    read, calls = failing([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(StackError, match="TOPIC_AUTHORIZATION_FAILED"):
        retrying(read, "end offsets", timeout_s=5, pause_s=0)
    assert len(calls) == 1
