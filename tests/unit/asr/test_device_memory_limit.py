"""The worker exports its device's memory limit, so an alert can compare reserved memory with it."""

import torch
from prometheus_client import REGISTRY

from pipeline.asr.devices import Device, cgroup_limit_bytes
from pipeline.run.worker_metrics import WorkerMetrics


def test_cgroup_limit_files() -> None:
    assert cgroup_limit_bytes("max\n") is None  # v2: no limit
    assert cgroup_limit_bytes("2147483648\n") == 2**31


def test_cpu_limit_is_at_least_what_the_process_holds() -> None:
    device = Device("cpu", torch.device("cpu"))
    assert device.memory_bytes()["reserved"] < device.memory_limit_bytes()


def test_limit_is_exported_beside_the_reserved_memory() -> None:
    WorkerMetrics("unit-limit").memory_limit(123)
    assert REGISTRY.get_sample_value("callqa_asr_device_memory_bytes", {"bucket": "unit-limit", "kind": "limit"}) == 123
