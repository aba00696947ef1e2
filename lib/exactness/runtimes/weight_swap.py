"""Reuse one ONNX export for another seed by replacing its initializers.

The exporter does not keep weights as they are: Linear weights are stored transposed under new names
(`val_NNN`), some are reshaped, eval BatchNorm is folded into the conformer's depthwise conv weight (under
the original name), and identical constants are merged. So the swap is learnt, not assumed: every
float initializer of the template export is explained as a function of the template model's tensors
(same tensor, transposed, reshaped, or a BatchNorm fold), or as a constant. The explanation is then
verified against a second, fresh export of another seed; anything it cannot reproduce bit for bit
makes the plan fail loudly, and callers fall back to fresh exports.
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


def _batchnorm_folds(model: torch.nn.Module) -> dict[str, Callable[[dict], torch.Tensor]]:
    """conv weight name -> fold of the BatchNorm that follows it (weight / sqrt(var + eps) * gamma)."""
    folds = {}
    for path, module in model.named_modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            parent, _, _ = path.rpartition(".")
            conv = f"{parent}.depthwise_conv.weight" if parent else "depthwise_conv.weight"
            eps = module.eps

            def fold(state, conv=conv, bn=path, eps=eps):
                scale = state[f"{bn}.weight"] / torch.sqrt(state[f"{bn}.running_var"] + eps)
                return state[conv] * scale.reshape(-1, 1, 1)

            folds[conv] = fold
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
