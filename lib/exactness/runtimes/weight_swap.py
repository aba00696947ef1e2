"""Reuse one ONNX export for another seed by replacing its initializers.

The exporter does not keep weights as they are: Linear weights are stored transposed under new names
(`val_NNN`), some are reshaped, eval BatchNorm is folded into the weight of the conv before it (under
the original name), and identical constants are merged. So the swap is learnt, not assumed: every float
initializer of the template export is explained as a function of the template model's tensors (same
tensor, transposed, reshaped, or the fold of an eval BatchNorm into the conv just before it: the
conformer's depthwise conv, a detector's conv+norm layers), or as a constant. The explanation is then
verified against a second, fresh export of another seed; anything it cannot reproduce bit for bit makes the
plan fail loudly, and callers fall back to fresh exports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from exactness.runtimes.onnx_graph import ExportedGraph


class SwapError(RuntimeError):
    pass


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in list(model.named_parameters()) + list(model.named_buffers())}


_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


def _conv_before(model: torch.nn.Module, path: str, channels: int) -> str | None:
    """The conv that feeds the BatchNorm at `path`: its nearest earlier sibling that is a conv with as many
    output channels (the conformer's depthwise conv, a detector's conv+norm layer or Sequential)."""
    parent, _, name = path.rpartition(".")
    owner = model.get_submodule(parent) if parent else model
    found = None
    for child, module in owner.named_children():
        if child == name:
            return found
        if isinstance(module, _CONVS) and module.out_channels == channels:
            found = f"{parent}.{child}" if parent else child
    return None


def _batchnorm_folds(model: torch.nn.Module) -> dict[str, Callable[[dict], torch.Tensor]]:
    """Initializer name -> how the exporter computed it from the model's tensors, for every eval BatchNorm
    whose conv sits just before it in the same module. The exporter's rewrite (onnxscript's BatchNorm fusion)
    computes in numpy float32: scale = gamma / sqrt(var + eps), the conv's weight times the scale along its
    output channels (under the weight's name), and the bias (conv bias - mean) * scale + beta, under the conv
    bias's name or, for a conv without one, the weight's name + "_bias". Done the same way here, so that the
    fold reproduces the export bit for bit."""
    folds = {}
    for path, module in model.named_modules():
        if not isinstance(module, _BATCHNORMS):
            continue
        conv = _conv_before(model, path, module.num_features)
        if conv is None:
            continue
        has_bias = model.get_submodule(conv).bias is not None
        eps = float(np.float32(module.eps))  # the ONNX attribute is a float32

        def scale(state, bn=path, eps=eps):
            gamma, var = state[f"{bn}.weight"].numpy(), state[f"{bn}.running_var"].numpy()
            return gamma / np.sqrt(var + eps)

        def weight(state, conv=conv, scale=scale):
            w = state[f"{conv}.weight"].numpy()
            return torch.from_numpy(w * scale(state).reshape(-1, *[1] * (w.ndim - 1)))

        def bias(state, conv=conv, bn=path, scale=scale, has_bias=has_bias):
            mean = state[f"{bn}.running_mean"].numpy()
            original = state[f"{conv}.bias"].numpy() if has_bias else np.zeros_like(mean)
            return torch.from_numpy((original - mean) * scale(state) + state[f"{bn}.bias"].numpy())

        folds[f"{conv}.weight"] = weight
        folds[f"{conv}.bias" if has_bias else f"{conv}.weight_bias"] = bias
    return folds


@dataclass(frozen=True)
class _Rule:
    kind: str  # "same", "transpose", "reshape", "batchnorm_fold", "constant"
    source: str | None
    shape: tuple

    def apply(self, state: dict[str, torch.Tensor], folds: dict, constant: np.ndarray | None) -> np.ndarray:
        if self.kind == "constant":
            return constant
        if self.kind == "batchnorm_fold":
            value = folds[self.source](state)
        else:
            value = state[self.source]
            value = value.T if self.kind == "transpose" else value
        return value.reshape(self.shape).contiguous().numpy()


def _explain(name: str, array: np.ndarray, state: dict[str, torch.Tensor], folds: dict) -> _Rule | None:
    target = torch.from_numpy(array.copy())
    shape = tuple(array.shape)
    if name in folds and torch.equal(folds[name](state).reshape(shape), target):
        return _Rule("batchnorm_fold", name, shape)
    ordered = ([name] if name in state else []) + [n for n in state if n != name]
    for source in ordered:
        value = state[source]
        if value.dtype != target.dtype or value.numel() != target.numel():
            continue
        if value.shape == target.shape and torch.equal(value, target):
            return _Rule("same", source, shape)
        if value.dim() == 2 and value.T.shape == target.shape and torch.equal(value.T, target):
            return _Rule("transpose", source, shape)
        if torch.equal(value.reshape(shape), target):
            return _Rule("reshape", source, shape)
    return None


@dataclass
class SwapPlan:
    rules: dict[str, _Rule]
    constants: dict[str, np.ndarray]
    verified_seed: int

    def initializers(self, model: torch.nn.Module) -> dict[str, np.ndarray]:
        state, folds = _state(model), _batchnorm_folds(model)
        return {name: rule.apply(state, folds, None) for name, rule in self.rules.items() if rule.kind != "constant"}


def learn(template: ExportedGraph, template_model: torch.nn.Module, check: ExportedGraph, check_model: torch.nn.Module,
          check_seed: int) -> SwapPlan:
    """Explain every initializer of `template` from `template_model`, then prove the explanation on
    `check` (a fresh export of `check_model`, another seed)."""
    first, second = template.initializer_arrays(), check.initializer_arrays()
    if {k: v.shape for k, v in first.items()} != {k: v.shape for k, v in second.items()}:
        raise SwapError("two exports of the same class have different initializers; the graph is not reusable")
    state, folds = _state(template_model), _batchnorm_folds(template_model)
    rules, constants = {}, {}
    for name, array in first.items():
        if array.dtype.kind != "f":
            rules[name], constants[name] = _Rule("constant", None, array.shape), array
            continue
        rule = _explain(name, array, state, folds)
        if rule is None or (rule.kind != "batchnorm_fold" and state[rule.source].numel() <= 1):
            if not np.array_equal(array, second[name]):
                raise SwapError(f"initializer {name!r} {array.shape} depends on the seed but matches no model tensor")
            rule = _Rule("constant", None, array.shape)
            constants[name] = array
        rules[name] = rule
    plan = SwapPlan(rules, constants, check_seed)
    rebuilt = plan.initializers(check_model)
    for name, array in second.items():
        if not np.array_equal(rebuilt.get(name, plan.constants.get(name)), array):
            raise SwapError(f"swapped initializer {name!r} ({rules[name].kind} of {rules[name].source}) differs from "
                            f"a fresh export of seed {check_seed}")
    return plan
