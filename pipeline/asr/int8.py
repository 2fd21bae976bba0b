"""int8 linear layers with a scale per row (CPU): weights int8 per output row, each input row
quantised on the fly with its own scale, products in int32 through ``torch._int_mm``.

Used for the decoder's linear layers, whose 16-row products are bound by reading the weights: on
a CPU with VNNI the int8 product of 16 x 512 -> 2,048 took 0.08 ms against 0.58 ms in fp32.
torch's dynamic quantisation (``Whisper.quantized``) scales a whole batch of rows at once, so a
row's text would depend on its batch-mates; a scale per row keeps each row its own.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

QMAX = 127.0


def int8_rows_fast() -> bool:
    """Whether int8 products pay here: a CPU with VNNI (AVX512-VNNI or AVX-VNNI), whose torch has
    ``torch._int_mm``; elsewhere its int8 product was no faster than fp32."""
    if not torch.cpu._is_vnni_supported():
        return False
    try:
        a = torch.ones(17, 16, dtype=torch.int8)
        return bool(torch._int_mm(a, torch.ones(16, 16, dtype=torch.int8))[0, 0] == 16)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


class Int8RowLinear(nn.Module):
    """A Linear computed in int8: ``y = (q(x) @ q(W)^T) * s_x * s_W + b``, scales per row of x and W."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scale = (weight.abs().amax(dim=1) / QMAX).clamp(min=1e-12)
        self.register_buffer("weight_t", torch.round(weight / scale[:, None]).to(torch.int8).t().contiguous())
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        self.out_features = linear.out_features

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1]).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(QMAX)
        q = rows.div(scale).round_().to(torch.int8)
        y = torch._int_mm(q, self.weight_t).float().mul_(scale).mul_(self.weight_scale)
        if self.bias is not None:
            y.add_(self.bias)
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


def int8_rows(module: nn.Module, keep: tuple[str, ...] = ()) -> int:
    """Replace every ``nn.Linear`` under ``module`` (but those named in ``keep``) with
    :class:`Int8RowLinear`; returns how many were replaced."""
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            if name not in keep:
                setattr(module, name, Int8RowLinear(child))
                count += 1
        else:
            count += int8_rows(child, keep)
    return count
