"""Whether two results are the same bits: tensors byte for byte (NaN equal to the same NaN, -0 unlike +0), through
the dicts, sequences, dataclasses and model outputs that hold them. What a fast path is verified with."""

from __future__ import annotations

import dataclasses

import torch


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def bit_identical(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and (a.numel() == 0 or torch.equal(_bytes(a), _bytes(b))))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and bit_identical(vars(a), vars(b))
    if hasattr(a, "items") and hasattr(b, "items"):  # dicts and a model's output objects
        a, b = dict(a.items()), dict(b.items())
        return a.keys() == b.keys() and all(bit_identical(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(bit_identical(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b
