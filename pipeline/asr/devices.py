"""The one device interface: cpu, cuda (NVIDIA, and ROCm/Hygon DCU which present as cuda), npu, mps.

Nothing else in the engine names a vendor. This module picks the device and
its inference dtype, applies the allocator configuration, synchronises for
honest timings, and reports allocated/reserved memory so a soak can show it
stays flat.
"""

from __future__ import annotations

import importlib.util
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from pipeline.asr.errors import DeviceError
from pipeline.asr.int8 import int8_rows_fast

DeviceKind = Literal["cpu", "cuda", "npu", "mps"]
DtypeName = Literal["auto", "float32", "float16", "bfloat16"]
OutputName = Literal["auto", "float32", "float16", "bfloat16", "int8"]


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 instructions (AVX512-BF16 or AMX). oneDNN also reports bf16 as
    supported on plain AVX-512, by conversion: there a bf16 cross-attention decode step (16 rows over
    1,500 frames) took 11.1 ms against 3.4 ms in fp32, and the engine ran 1.2x slower."""
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def _npu_module():  # torch_npu registers the "npu" device type on import
    if importlib.util.find_spec("torch_npu") is None:
        return None
    import torch_npu  # noqa: F401  (import side effect registers torch.npu)

    return getattr(torch, "npu", None)


def _backend(kind: DeviceKind):
    return {"cuda": getattr(torch, "cuda", None), "npu": _npu_module(), "mps": getattr(torch, "mps", None)}.get(kind)


def _available(kind: DeviceKind) -> bool:
    if kind == "cpu":
        return True
    if kind == "mps":
        return bool(torch.backends.mps.is_available())
    backend = _backend(kind)
    return bool(backend is not None and backend.is_available())


@dataclass(frozen=True)
class Device:
    kind: DeviceKind
    torch_device: torch.device

    @property
    def description(self) -> str:
        if self.kind == "cuda":
            flavour = "rocm" if getattr(torch.version, "hip", None) else "cuda"
            return f"{flavour}:{torch.cuda.get_device_name(self.torch_device)}"
        return self.kind

    def inference_dtype(self, requested: DtypeName) -> torch.dtype:
        """fp32 on CPU (bf16 measured no faster there, pipeline/asr/README.md); on accelerators
        bf16 where supported, else fp16."""
        if requested != "auto":
            return getattr(torch, requested)
        if self.kind == "cpu":
            return torch.float32
        if self.kind == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float16

    def encoder_dtype(self, model_dtype: torch.dtype, requested: DtypeName) -> torch.dtype:
        """The encoder's dtype. Its large matrix products run about 2.5x faster in bf16 where the
        CPU has AMX tiles; with AVX512-BF16 alone they ran slower than fp32 (a 1500 x 512 x 2048
        product: 86 ms bf16, 76 ms fp32, one thread). The engine encodes one window per call on
        CPU, so a window's features never depend on its batch-mates (pipeline/asr/README.md)."""
        if requested == "auto" and self.kind == "cpu" and not torch.cpu._is_amx_tile_supported():
            return model_dtype
        return self._narrow_on_cpu(model_dtype, requested)

    def cross_kv_dtype(self, model_dtype: torch.dtype, requested: DtypeName) -> torch.dtype:
        """The cross-attention cache's dtype. Each decoder step reads every row's whole cache, so
        on CPU it is bandwidth-bound: bf16 halves it, with identical text on the measured batches."""
        return self._narrow_on_cpu(model_dtype, requested)

    def output_kind(self, model_dtype: torch.dtype, requested: OutputName) -> torch.dtype | Literal["int8"]:
        """What the vocabulary projection's candidates are computed in (then scored exactly, see
        :class:`pipeline.asr.model.TiedOutput`): int8 on CPU where torch has its x86/fbgemm
        quantised kernels (5-7x faster than bf16 at 1-16 rows), else as the cross cache."""
        if requested == "int8" or (
            requested == "auto" and self.kind == "cpu" and model_dtype == torch.float32
            and {"x86", "fbgemm"} & set(torch.backends.quantized.supported_engines)
        ):
            if self.kind != "cpu":
                raise DeviceError(f"an int8 vocabulary projection runs on cpu only, not {self.kind}")
            return "int8"
        return self._narrow_on_cpu(model_dtype, requested)

    def _narrow_on_cpu(self, model_dtype: torch.dtype, requested: DtypeName) -> torch.dtype:
        """bf16 for an fp32 model on a CPU that computes bf16 natively (AVX512-BF16/AMX), unless asked otherwise."""
        if requested != "auto":
            return getattr(torch, requested)
        if self.kind == "cpu" and model_dtype == torch.float32 and cpu_computes_bf16():
            return torch.bfloat16
        return model_dtype

    def int8_decoder_linears(self, model_dtype: torch.dtype, requested: str, cross_kv: torch.dtype) -> bool:
        """The decoder's linear layers in int8 with a scale per row: "auto" on a CPU with VNNI
        (about 7x the fp32 product at 16 rows), for an fp32 model whose cross-attention cache is
        fp32 too. One narrowing at a time: on a CPU with AVX512-BF16 the bf16 cache and int8
        linears together read a card's 16 spoken digits as 17 and lost a looping turn's words
        (two engine tests), where either alone did not."""
        if requested == "int8" and (self.kind != "cpu" or model_dtype != torch.float32):
            raise DeviceError(f"int8 decoder linears run on cpu with an fp32 model, not {self.kind}/{model_dtype}")
        if requested == "auto":
            return self.kind == "cpu" and model_dtype == cross_kv == torch.float32 and int8_rows_fast()
        return requested == "int8"

    def wants_int8(self, quantize: str) -> bool:
        """int8 dynamic quantisation, on request only: it was no faster than fp32 here, cost WER,
        and its per-batch activation scales make a window's text depend on its batch-mates."""
        if quantize == "int8" and self.kind != "cpu":
            raise DeviceError(f"int8 dynamic quantisation runs on cpu only, not {self.kind}")
        return quantize == "int8"

    def configure_allocator(self) -> None:
        """Expandable segments keep fragmentation (and so reserved memory) flat where supported."""
        if self.kind == "cuda" and not getattr(torch.version, "hip", None):
            setter = getattr(torch.cuda.memory, "_set_allocator_settings", None)
            if setter is not None:
                setter("expandable_segments:True")
        # ROCm/Hygon has no expandable segments; npu reads PYTORCH_NPU_ALLOC_CONF, set by the operator.

    def synchronize(self) -> None:
        backend = _backend(self.kind)
        if backend is not None and hasattr(backend, "synchronize"):
            backend.synchronize()

    def memory_bytes(self) -> dict[str, int]:
        """allocated / reserved / peak bytes of the device allocator (process RSS on CPU)."""
        if self.kind in ("cuda", "npu"):
            backend = _backend(self.kind)
            return {
                "allocated": int(backend.memory_allocated(self.torch_device)),
                "reserved": int(backend.memory_reserved(self.torch_device)),
                "peak": int(backend.max_memory_allocated(self.torch_device)),
            }
        if self.kind == "mps":
            return {
                "allocated": int(torch.mps.current_allocated_memory()),
                "reserved": int(torch.mps.driver_allocated_memory()),
                "peak": int(torch.mps.driver_allocated_memory()),
            }
        return {"allocated": _rss_bytes(), "reserved": _rss_bytes(), "peak": _peak_rss_bytes()}

    def memory_limit_bytes(self) -> int:
        """The memory ``memory_bytes()["reserved"]`` can grow to: the device's total memory, or on
        CPU the container's memory limit (cgroup), else physical memory."""
        if self.kind in ("cuda", "npu"):
            return int(_backend(self.kind).mem_get_info(self.torch_device)[1])
        if self.kind == "mps":
            return int(torch.mps.recommended_max_memory())
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        for path in CGROUP_MEMORY_LIMITS:
            try:
                limit = cgroup_limit_bytes(Path(path).read_text())
            except OSError:
                continue
            if limit is not None:
                return min(limit, physical)
        return physical

    def reset_peak(self) -> None:
        if self.kind in ("cuda", "npu"):
            _backend(self.kind).reset_peak_memory_stats(self.torch_device)


CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # v2, v1


def cgroup_limit_bytes(text: str) -> int | None:
    """A cgroup memory limit file's value; None for no limit ("max" in v2)."""
    value = text.strip()
    return None if value in ("", "max") else int(value)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def resolve_device(spec: str = "auto") -> Device:
    """'auto' picks the first available of cuda, npu, mps, cpu; 'cuda:1' style indices pass through."""
    if spec == "auto":
        for kind in ("cuda", "npu", "mps"):
            if _available(kind):  # type: ignore[arg-type]
                return resolve_device(kind)
        return Device("cpu", torch.device("cpu"))
    kind = spec.split(":", 1)[0]
    if kind not in ("cpu", "cuda", "npu", "mps"):
        raise DeviceError(f"unknown device {spec!r}: use cpu, cuda, npu, mps or auto")
    if not _available(kind):  # type: ignore[arg-type]
        raise DeviceError(f"device {spec!r} is not available in this torch build")
    return Device(kind, torch.device(spec))  # type: ignore[arg-type]
