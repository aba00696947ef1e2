"""Eager forward with every module's output captured through forward hooks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from transformers import set_seed

# The export test seeds torch right before the eager forward (`set_seed(1234)`); a forward that draws
# random numbers in eval mode (UniSpeechForPreTraining's Bernoulli replacement) depends on it.
EXPORT_TEST_FORWARD_SEED = 1234
RECENT = 8  # how many of the latest module outputs a module's input is looked for among


@dataclass
class EagerRun:
    outputs: dict[str, torch.Tensor]  # the model's own outputs (non-None tensors), by name
    modules: dict[str, list[torch.Tensor]]  # module path -> the tensors it returned
    gathered: bool = False  # the quantizer's codevectors were gathered (codevector_lookup), not multiplied out
    # module path -> the module whose output it read, bit for bit ("" when its input is no module's output, as a
    # norm reading a residual sum): what a module's noise is measured against
    input_of: dict[str, str] | None = None


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict) or hasattr(value, "values"):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _forcing(codes: torch.Tensor, codes_per_row: int):
    """A hook that makes the quantizer's argmax pick `codes`: in eval mode its logits feed nothing but the
    argmax, so lifting the chosen logit above the row's maximum changes the decision and nothing else."""

    def hook(module, args, out):
        rows = out.reshape(-1, codes_per_row).clone()
        top = rows.max(dim=-1).values
        rows[torch.arange(rows.shape[0]), codes] = top + 1.0
        return rows.view(out.shape)

    return hook


def run(model: torch.nn.Module, inputs: dict[str, torch.Tensor], capture: bool | set[str] = True,
        force_codes: torch.Tensor | None = None) -> EagerRun:
    """One eager forward as the export test runs it; `force_codes` re-runs it with the quantizer's
    discrete choices taken from elsewhere (ORT's), to compare everything downstream of the same decisions.
    `capture`: every module (True), none (False), or only the module paths in a set."""
    captured: dict[str, list[torch.Tensor]] = {}
    input_of: dict[str, str] = {}
    handles = []
    if force_codes is not None:
        per_row = model.config.num_codevectors_per_group
        handles.append(model.quantizer.weight_proj.register_forward_hook(_forcing(force_codes, per_row)))
    if capture:
        def keep(path):
            def hook(module, args, out):  # returns None: a hook that returns a value replaces the output
                captured.setdefault(path, [t.detach().clone() for t in _tensors(out)])

            return hook

        def source(path):
            def hook(module, args, kwargs):  # returns None: a pre-hook that returns a value replaces the inputs
                first = next((t for t in _tensors(list(args) + list(kwargs.values()))), None)
                if first is None or path in input_of:
                    return
                recent = list(captured.items())[-RECENT:]
                input_of[path] = next((p for p, out in reversed(recent) if out and out[0].shape == first.shape
                                       and torch.equal(out[0], first)), "")

            return hook

        chosen = [(path, module) for path, module in model.named_modules()
                  if path and (capture is True or path in capture)]
        handles += [module.register_forward_pre_hook(source(path), with_kwargs=True) for path, module in chosen]
        handles += [module.register_forward_hook(keep(path)) for path, module in chosen]
    try:
        with torch.no_grad():
            set_seed(EXPORT_TEST_FORWARD_SEED)
            output = model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return EagerRun(flatten_outputs(output), captured, input_of=input_of)


def flatten_outputs(output) -> dict[str, torch.Tensor]:
    """A model's outputs under the graph's names, as the exporter names them: a dict's by key, a tuple inside one
    as `name.0`, `name.1`, ..., a dict inside one as `name.key`, a returned tuple's as `0`, `1`, ... (`1.0` inside),
    one returned tensor as `output`; a dataclass's by field; None is left out."""
    if hasattr(output, "items"):
        items = output.items()
    elif dataclasses.is_dataclass(output) and not isinstance(output, type):
        items = [(f.name, getattr(output, f.name)) for f in dataclasses.fields(output)]
    elif isinstance(output, (tuple, list)):
        items = [(str(i), item) for i, item in enumerate(output)]
    else:
        items = [("output", output)]
    flat = {}

    def add(name, value):
        if isinstance(value, torch.Tensor):
            flat[name] = value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                add(f"{name}.{i}", item)
        elif hasattr(value, "items"):  # a nested output (CLIPSeg's vision_model_output): `name.key`
            for key, item in value.items():
                add(f"{name}.{key}", item)

    for name, value in items:
        add(name, value)
    return flat
