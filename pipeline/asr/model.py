"""The Whisper encoder-decoder in torch, built for batched inference.

Shapes use B (batch), F (mel frames), T (encoder positions = F / 2), L (tokens),
D (model width), H (heads), Dh (D / H). Attention goes through
``scaled_dot_product_attention`` so each backend picks its fused kernel.

The encoder accepts any F up to the trained 3000 frames: a short window can run
with a shortened context (positions ``[:T]``) — the engine measures whether
that keeps accuracy. The decoder reads and writes a caller-owned key/value
cache (:class:`KVCache`), so buffers are allocated once by the memory pool.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class WhisperDims:
    """Architecture sizes, read from the checkpoint rather than assumed."""

    n_mels: int
    n_audio_ctx: int
    n_text_ctx: int
    n_vocab: int
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class KVCache:
    """Per-layer decoder caches, views into pool buffers.

    self_kv: (layers, 2, B, H, L_max, Dh) keys/values of generated tokens.
    cross_kv: (layers, 2, B, H, T, Dh) keys/values of the encoder output.
    cross_mask: (B, 1, 1, T) True where a row has encoder output, when rows were
        encoded at different lengths (None: every row fills all T positions).
    length: tokens already written into ``self_kv``.
    """

    self_kv: Tensor
    cross_kv: Tensor
    cross_mask: Tensor | None = None
    length: int = 0


class MultiHeadAttention(nn.Module):
    """Fused-projection attention; ``qkv`` for self-attention, ``q`` + ``kv`` for cross."""

    def __init__(self, d_model: int, n_heads: int, cross: bool) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.cross = cross
        if cross:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _heads(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, H, L, Dh)."""
        b, n, d = x.shape
        return x.view(b, n, self.n_heads, d // self.n_heads).transpose(1, 2)

    def _merge(self, x: Tensor) -> Tensor:
        """(B, H, L, Dh) -> (B, L, D)."""
        b, h, n, dh = x.shape
        return x.transpose(1, 2).reshape(b, n, h * dh)

    def encode_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention keys/values of encoder output (B, T, D) -> 2 x (B, H, T, Dh)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward_full(self, x: Tensor) -> Tensor:
        """Encoder self-attention over all positions of x (B, T, D)."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v))
        return self.out(self._merge(y))

    def forward_cached(self, x: Tensor, kv: Tensor, start: int) -> Tensor:
        """Decoder self-attention of new tokens x (B, L, D) writing into kv (2, B, H, L_max, Dh).

        Positions ``[start, start + L)`` are filled; attention is causal over
        ``[0, start + L)``.
        """
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        n = x.shape[1]
        kv[0, :, :, start : start + n] = self._heads(k)
        kv[1, :, :, start : start + n] = self._heads(v)
        keys = kv[0, :, :, : start + n]
        values = kv[1, :, :, : start + n]
        mask = None
        if n > 1:
            # rows may attend to the cached prefix plus their own causal past
            mask = torch.ones(n, start + n, dtype=torch.bool, device=x.device).tril(start)
        y = F.scaled_dot_product_attention(self._heads(q), keys, values, attn_mask=mask)
        return self.out(self._merge(y))

    def forward_cross(self, x: Tensor, kv: Tensor, mask: Tensor | None = None) -> Tensor:
        """Cross-attention of x (B, L, D) over cached encoder keys/values kv (2, B, H, T, Dh);
        mask (B, 1, 1, T) hides positions past a row's own encoder length."""
        q = self._heads(self.q(x)).to(kv.dtype)  # the cache may be narrower than the model (bf16 on CPU)
        y = F.scaled_dot_product_attention(q, kv[0], kv[1], attn_mask=mask).to(x.dtype)
        return self.out(self._merge(y))


class MLP(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class EncoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.attn_ln = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, cross=False)
        self.mlp_ln = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn.forward_full(self.attn_ln(x))
        return x + self.mlp(self.mlp_ln(x))


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.attn_ln = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, cross=False)
        self.cross_attn_ln = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, cross=True)
        self.mlp_ln = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: Tensor, self_kv: Tensor, cross_kv: Tensor, start: int,
                cross_mask: Tensor | None = None) -> Tensor:
        x = x + self.attn.forward_cached(self.attn_ln(x), self_kv, start)
        x = x + self.cross_attn.forward_cross(self.cross_attn_ln(x), cross_kv, cross_mask)
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    def __init__(self, dims: WhisperDims) -> None:
        super().__init__()
        d = dims.d_model
        self.conv1 = nn.Conv1d(dims.n_mels, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional", torch.empty(dims.n_audio_ctx, d))
        self.blocks = nn.ModuleList(EncoderBlock(d, dims.n_heads) for _ in range(dims.n_encoder_layers))
        self.ln_post = nn.LayerNorm(d)

    def forward(self, mel: Tensor) -> Tensor:
        """mel (B, n_mels, F) with F even and F / 2 <= n_audio_ctx -> (B, F / 2, D)."""
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).transpose(1, 2)
        x = x + self.positional[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


class TiedOutput(nn.Module):
    """(B, D) -> (B, vocab) logits through the token embedding's weight (Whisper ties them).

    Holds the embedding without registering it, so the state dict has no extra key. Each decoder
    step reads the whole 51,865 x 512 matrix, the largest single cost of a CPU decode. With
    :meth:`narrow`, candidates come from a cheaper product (a bf16 copy of the weight, or int8
    through fbgemm's dynamic kernel, 5-7x faster than bf16 for 1-16 rows on the benchmark
    machine) and are scored again exactly in the model's dtype: the ``rescore`` likeliest tokens
    of each row and every id from ``exact_from`` on (the timestamps, whose summed probability
    decides the timestamp rule). Greedy decoding then picks between exact logits; only the
    softmax's sum over the other tokens sees the approximation.
    """

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self._embedding = (embedding,)
        self._narrow: Tensor | None = None
        self._int8: nn.Module | None = None
        self.rescore = 0
        self.exact_from: int | None = None

    def narrow(self, dtype: torch.dtype | Literal["int8"], rescore: int, exact_from: int | None = None) -> None:
        weight = self._embedding[0].weight.detach()
        self._narrow = self._int8 = None
        if dtype == "int8":
            self._int8 = _int8_linear(weight)
        elif dtype != weight.dtype:
            self._narrow = weight.to(dtype)
        self.rescore, self.exact_from = rescore, exact_from

    def forward(self, x: Tensor) -> Tensor:
        weight = self._embedding[0].weight
        if self._int8 is not None:
            logits = self._int8(x.float()).to(x.dtype)
        elif self._narrow is not None:
            logits = F.linear(x.to(self._narrow.dtype), self._narrow).to(x.dtype)
        else:
            return F.linear(x, weight)
        if self.exact_from is not None:
            logits[:, self.exact_from :] = F.linear(x, weight[self.exact_from :])
        top = logits.topk(self.rescore, dim=-1).indices  # (B, k)
        exact = torch.einsum("bd,bkd->bk", x, weight[top])
        return logits.scatter_(1, top, exact)

    def as_linear(self) -> nn.Linear:
        """A Linear holding a copy of the weight (what int8 quantisation can replace)."""
        weight = self._embedding[0].weight
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
        linear.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        return linear


class TextDecoder(nn.Module):
    def __init__(self, dims: WhisperDims) -> None:
        super().__init__()
        d = dims.d_model
        # weights always come from a checkpoint: no normal_() init (on the meta device it imports ~1.5 s of torch)
        self.token_embedding = nn.Embedding(dims.n_vocab, d, _weight=torch.empty(dims.n_vocab, d))
        self.register_buffer("positional", torch.empty(dims.n_text_ctx, d))
        self.blocks = nn.ModuleList(DecoderBlock(d, dims.n_heads) for _ in range(dims.n_decoder_layers))
        self.ln = nn.LayerNorm(d)
        self.output: nn.Module = TiedOutput(self.token_embedding)

    def fill_cross_kv(self, memory: Tensor, cross_kv: Tensor) -> None:
        """Write every layer's cross keys/values of memory (B, T, D) into cross_kv (layers, 2, B, H, T, Dh)."""
        for i, block in enumerate(self.blocks):
            k, v = block.cross_attn.encode_kv(memory)
            cross_kv[i, 0].copy_(k)
            cross_kv[i, 1].copy_(v)

    def forward(self, tokens: Tensor, cache: KVCache) -> Tensor:
        """New tokens (B, L) -> logits of their last position (B, vocab); advances the cache."""
        start = cache.length
        x = self.token_embedding(tokens) + self.positional[start : start + tokens.shape[1]]
        for i, block in enumerate(self.blocks):
            x = block(x, cache.self_kv[i], cache.cross_kv[i], start, cache.cross_mask)
        cache.length = start + tokens.shape[1]
        return self.output(self.ln(x[:, -1]))


class Whisper(nn.Module):
    def __init__(self, dims: WhisperDims) -> None:
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims)
        self.decoder = TextDecoder(dims)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the decoder computes in (and encoder output is handed over in)."""
        return self.decoder.positional.dtype

    @property
    def encoder_dtype(self) -> torch.dtype:
        """The dtype features enter the encoder in (narrower than the decoder's on bf16 CPUs)."""
        return self.encoder.conv1.weight.dtype

    def quantized(self) -> Whisper:
        """int8 dynamic quantisation of every Linear (weights int8, activations quantised per
        batch, so a row's result depends on its batch-mates; opt-in, see pipeline/asr/README.md).
        Convolutions, norms and attention stay fp32."""
        tied = self.decoder.output
        if isinstance(tied, TiedOutput):
            self.decoder.output = tied.as_linear()
        return torch.ao.quantization.quantize_dynamic(self, {nn.Linear}, dtype=torch.qint8)


def _int8_linear(weight: Tensor) -> nn.Module:
    """fbgemm's dynamic int8 Linear (no bias) of an fp weight (out, in), quantised per output row."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    w = weight.float().cpu()
    scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-12).double()
    with warnings.catch_warnings():  # quantised tensors are marked for a later torch; the pinned one has them
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(w, scales, torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8)
        linear = DynamicLinear(w.shape[1], w.shape[0], bias_=False, dtype=torch.qint8)
        linear.set_weight_bias(q, None)
    return linear
