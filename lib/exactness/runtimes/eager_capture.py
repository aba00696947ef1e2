"""Eager forward with every module's output captured through forward hooks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import set_seed

# The export test seeds torch right before the eager forward (`set_seed(1234)`); a forward that draws
# random numbers in eval mode (UniSpeechForPreTraining's Bernoulli replacement) depends on it.
EXPORT_TEST_FORWARD_SEED = 1234


@dataclass
class EagerRun:
    outputs: dict[str, torch.Tensor]  # the model's own outputs (non-None tensors), by name
    modules: dict[str, list[torch.Tensor]]  # module path -> the tensors it returned


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict) or hasattr(value, "values"):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def run(model: torch.nn.Module, inputs: dict[str, torch.Tensor], capture: bool = True) -> EagerRun:
    captured: dict[str, list[torch.Tensor]] = {}
    handles = []
    if capture:
        def keep(path):
            return lambda module, args, out: captured.setdefault(path, [t.detach().clone() for t in _tensors(out)])

        handles = [module.register_forward_hook(keep(path)) for path, module in model.named_modules() if path]
    try:
        with torch.no_grad():
            set_seed(EXPORT_TEST_FORWARD_SEED)
            output = model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    outputs = {k: v for k, v in output.items() if isinstance(v, torch.Tensor)}
    return EagerRun(outputs, captured)
