"""A builder file of your own, as a user writes one: a small module whose forward returns what `returns` says."""

from __future__ import annotations

import textwrap
from pathlib import Path


def pair_builder(path: Path, returns: str) -> Path:
    """Write `path`: `build(seed) -> (Pair(), {"x": ...})`, a linear layer `h` whose forward returns `returns`."""
    path.write_text(textwrap.dedent(f"""
        import torch


        class Pair(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(8, 4)

            def forward(self, x):
                h = self.proj(x)
                return {returns}


        def build(seed):
            torch.manual_seed(seed)
            return Pair(), {{"x": torch.randn(3, 8)}}
        """))
    return path
