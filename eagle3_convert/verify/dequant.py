"""Dequantized reference weights for a ModelOpt-quantized drafter: verify measures it with the maths of its
weights as stored, in float32 (CPU torch has no FP8 / NVFP4 matmul kernel). Static activation scales
(`input_scale`) are not simulated: the reference quantizes weights only (docs/formats.md §2.9).

FP8: weight.float() * weight_scale (per tensor, or one per output row), as ModelOpt's export wrote it
(weight / scale cast to float8_e4m3fn). NVFP4: each byte holds two e2m1 codes, the low nibble first; a code is
one of E2M1 below; each block of `in / weight_scale.shape[1]` (16) columns is scaled by
weight_scale (F8_E4M3) * weight_scale_2 (F32). Both follow NVFP4QTensor.dequantize
(modelopt/torch/quantization/qtensor/nvfp4_tensor.py:345-405, nvidia-modelopt 0.47.0).
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from ..errors import RefusalError
from ..quantization import companion

# e2m1 code -> value (nvfp4_tensor.py:27)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantized(tensors: Mapping[str, object], load: Callable[[object], torch.Tensor],
                device: torch.device) -> dict[str, torch.Tensor]:
    """Every tensor but the scales and the vocab map, as float32, the quantized weights dequantized."""
    out = {}
    for name, src in tensors.items():
        if name in ("d2t", "t2d") or companion(name):
            continue
        w = load(src).to(device)
        scale = tensors.get(f"{name}_scale")
        if scale is None:
            out[name] = w.to(torch.float32)
        elif w.dtype == torch.uint8:
            out[name] = nvfp4(w, load(scale).to(device), load(tensors[f"{name}_scale_2"]).to(device))
        else:
            s = load(scale).to(device=device, dtype=torch.float32)
            if s.numel() not in (1, w.shape[0]):
                raise RefusalError(f"{name}'s scale {list(s.shape)} is neither per tensor nor per row (FP8_PB_WO's "
                                   "blocks): verify does not dequantize it", "measure an unquantized copy of the "
                                   "drafter", code="E-VERIFY-DTYPE")
            out[name] = w.to(torch.float32) * (s.reshape(()) if s.numel() == 1 else s.reshape(-1, 1))
    return out


def nvfp4(packed: torch.Tensor, block_scale: torch.Tensor, global_scale: torch.Tensor) -> torch.Tensor:
    rows, half = packed.shape
    codes = torch.empty(rows, half * 2, dtype=torch.long, device=packed.device)
    codes[:, 0::2] = (packed & 0x0F).long()
    codes[:, 1::2] = (packed >> 4).long()
    values = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)[codes]
    scale = block_scale.to(torch.float32) * global_scale.to(torch.float32)
    return (values.view(rows, scale.shape[1], -1) * scale.unsqueeze(-1)).reshape(rows, half * 2)
