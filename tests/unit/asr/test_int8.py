"""int8 linear layers with a scale per row (pipeline/asr/int8.py): close to fp32, and each row's
result its own whatever its batch-mates."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pipeline.asr.int8 import Int8RowLinear, int8_rows, int8_rows_fast


def test_an_int8_linear_is_close_to_its_fp32_linear_and_a_row_does_not_depend_on_its_batch():
    torch.manual_seed(0)
    linear = nn.Linear(512, 2048)
    x = torch.randn(16, 512)
    x[3] *= 40  # one loud row: a scale per batch would coarsen every other row
    q = Int8RowLinear(linear)
    with torch.inference_mode():
        exact, got = linear(x), q(x)
        alone = torch.stack([q(row[None])[0] for row in x])
    err = ((got - exact).norm(dim=1) / exact.norm(dim=1)).max()
    assert err < 0.02, float(err)
    assert torch.equal(got, alone)
    assert q(x[None]).shape == (1, 16, 2048)  # (B, L, D) in, (B, L, out) out


def test_the_decoder_blocks_linears_are_replaced_but_the_cross_attention_keys_and_values():
    block = nn.ModuleDict(
        {
            "attn": nn.ModuleDict({"qkv": nn.Linear(8, 24), "out": nn.Linear(8, 8)}),
            "cross": nn.ModuleDict({"q": nn.Linear(8, 8), "kv": nn.Linear(8, 16)}),
        }
    )
    assert int8_rows(block, keep=("kv",)) == 3
    assert isinstance(block["attn"]["qkv"], Int8RowLinear) and isinstance(block["cross"]["q"], Int8RowLinear)
    assert isinstance(block["cross"]["kv"], nn.Linear)


@pytest.mark.parametrize("vnni", [False, True])
def test_int8_decoder_linears_are_chosen_only_on_a_cpu_with_vnni_and_an_fp32_cross_cache(monkeypatch, vnni):
    from pipeline.asr.devices import resolve_device

    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
    cpu = resolve_device("cpu")
    f32 = torch.float32
    assert cpu.int8_decoder_linears(f32, "auto", f32) == vnni  # the pinned torch has torch._int_mm
    assert not cpu.int8_decoder_linears(f32, "auto", torch.bfloat16)  # a bf16 cache: one narrowing at a time
    assert cpu.int8_decoder_linears(f32, "int8", torch.bfloat16)  # asked for: given
    assert not cpu.int8_decoder_linears(f32, "float", f32)
    assert int8_rows_fast() == vnni
