"""Pre-allocated buffers for every length bucket's largest batch, allocated once.

Batches run one after another, so all buckets share one arena per buffer
kind: the arena is as large as the largest bucket needs, and each bucket gets
views shaped for its own largest batch. Input audio and the decoder's
key/value caches (self and cross) live here; encoder activations go through
the backend's caching allocator. A batch larger than its bucket's shape is
refused here and split by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.asr.errors import AsrError
from pipeline.asr.features import HOP, SAMPLE_RATE
from pipeline.asr.model import KVCache, WhisperDims


@dataclass(frozen=True)
class BucketShape:
    """Largest batch of one bucket: ``items`` windows padded to ``bucket_s`` seconds."""

    bucket_s: float
    items: int

    @property
    def mel_frames(self) -> int:
        return int(round(self.bucket_s * SAMPLE_RATE / HOP))

    @property
    def samples(self) -> int:
        return self.mel_frames * HOP

    @property
    def audio_ctx(self) -> int:
        return self.mel_frames // 2


class MemoryPool:
    """Arenas for audio, self-attention and cross-attention caches on one device."""

    def __init__(
        self,
        dims: WhisperDims,
        shapes: list[BucketShape],
        max_tokens: int,
        device: torch.device,
        dtype: torch.dtype,
        cross_dtype: torch.dtype | None = None,
    ) -> None:
        self.dims, self.max_tokens = dims, max_tokens
        self.shapes = {s.bucket_s: s for s in shapes}
        per_row_self = 2 * dims.n_decoder_layers * dims.d_model * max_tokens
        per_pos_cross = 2 * dims.n_decoder_layers * dims.d_model
        # Uninitialised: audio rows are zeroed when handed out, cache positions are written before
        # they are read (self-attention reads [0, length), cross-attention a batch's own rows).
        # On CPU the pages are then committed as first used (zeroing 415 MB cost ~1 s at load).
        self._audio = torch.empty(max(s.items * s.samples for s in shapes), device=device)
        self._self = torch.empty(max(s.items for s in shapes) * per_row_self, device=device, dtype=dtype)
        self._cross = torch.empty(
            max(s.items * s.audio_ctx for s in shapes) * per_pos_cross, device=device, dtype=cross_dtype or dtype
        )

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self._audio, self._self, self._cross))

    def capacity(self, bucket_s: float) -> int:
        return self.shapes[bucket_s].items

    def audio(self, bucket_s: float, n: int) -> torch.Tensor:
        """Zeroed (n, samples) float32 input buffer for n windows of this bucket."""
        shape = self._check(bucket_s, n)
        view = self._audio[: n * shape.samples].view(n, shape.samples)
        view.zero_()
        return view

    def kv_cache(self, bucket_s: float, n: int) -> KVCache:
        """Cache views: self (layers, 2, n, H, max_tokens, Dh), cross (layers, 2, n, H, T, Dh)."""
        shape = self._check(bucket_s, n)
        d = self.dims
        self_shape = (d.n_decoder_layers, 2, n, d.n_heads, self.max_tokens, d.head_dim)
        cross_shape = (d.n_decoder_layers, 2, n, d.n_heads, shape.audio_ctx, d.head_dim)
        self_kv = self._self[: _numel(self_shape)].view(self_shape)
        cross_kv = self._cross[: _numel(cross_shape)].view(cross_shape)
        return KVCache(self_kv=self_kv, cross_kv=cross_kv, length=0)

    def _check(self, bucket_s: float, n: int) -> BucketShape:
        if bucket_s not in self.shapes:
            raise AsrError(f"no pool shape for bucket {bucket_s} s")
        shape = self.shapes[bucket_s]
        if n > shape.items:
            raise AsrError(f"batch of {n} exceeds the pool shape of bucket {bucket_s} s ({shape.items})")
        return shape


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total
