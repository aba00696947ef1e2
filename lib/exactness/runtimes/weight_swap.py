"""Reuse one ONNX export for another seed by replacing its initializers.

The exporter does not keep weights as they are: Linear weights are stored transposed under new names
(`val_NNN`), some are reshaped, eval BatchNorm is folded into the weight of the conv before it (under
the original name), and identical constants are merged. So the swap is learnt, not assumed: every float
initializer of the template export is explained as a function of the template model's tensors (same
tensor, transposed, reshaped, or the fold of an eval BatchNorm into the conv just before it: the
conformer's depthwise conv, a detector's conv+norm layers), or as a constant. A value that differs between
the two exports but that no model tensor holds as it is was folded by the exporter from the seed's tensors:
it is explained as a parameter broadcast (an expanded class token), rows gathered from one (an embedding
looked up by constant ids, a repeat over the batch), a Linear layer's projection of one's first rows (a
decoder's learnt queries) or, failing those, elements copied from one (a position table sliced and permuted
channels first, half of each reference box, as it is or its exp), each learnt on the template too. The
explanation is then verified against a second, fresh export of another seed; anything it cannot reproduce
bit for bit makes the plan fail loudly, and callers fall back to fresh exports.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`; a check row's `weights_path`):
- replaces: a fresh ONNX export per seed (10-30 s);
- exact because: the graph is the same for every seed of a class; only initializers differ, and each is
  rebuilt by the rule learnt for it;
- verified by: `learn` itself against a second fresh export (bit for bit, or refused: `GraphPool.swap_state`),
  tests/runtimes/test_weight_swap.py, test_onnx_graph.py and tests/studies/near_tie/test_near_tie_paths.py.
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


def broadcast_of(value: torch.Tensor, shape: tuple) -> torch.Tensor | None:
    """`value` broadcast to `shape` (numpy's rule: trailing axes aligned, size-1 axes stretched), or None where
    it does not broadcast. The exporter folds an `expand` of a parameter (a class token or class embedding
    expanded over the batch before a concat) into a constant of the expanded shape: every element is a copy
    of one of the parameter's, so broadcasting the seed's parameter rebuilds it exactly."""
    try:
        if torch.broadcast_shapes(tuple(value.shape), shape) != torch.Size(shape):
            return None
    except RuntimeError:
        return None
    return value.expand(shape)


def _row_table(value: torch.Tensor, width: int) -> np.ndarray | None:
    """`value` as a table of rows `width` wide (an embedding table: its last axis is the row), or None."""
    if value.dim() == 0 or value.shape[-1] != width:
        return None
    return value.reshape(-1, width).numpy()


def gathered_rows(table: np.ndarray, target: np.ndarray) -> tuple[int, ...] | None:
    """The row of `table` (a parameter's rows, `_row_table`) that each row of `target` holds (the first, where
    rows coincide), or None where some target row is in no row of the table. The exporter folds an
    `embedding` lookup by constant ids (token type 0), an index or slice of one row (a level embedding) and a
    `repeat` over the batch into a constant: each of its rows is a copy of one row of the table, so gathering
    the same rows from another seed's table rebuilds it exactly."""
    first: dict[bytes, int] = {}
    for row in range(table.shape[0]):
        first.setdefault(table[row].tobytes(), row)
    index = [first.get(row.tobytes()) for row in target.reshape(-1, table.shape[1])]
    return None if any(row is None for row in index) else tuple(index)


def heads_layout(projected: np.ndarray, shape: tuple) -> np.ndarray | None:
    """`projected` (batch, sequence, features) in the layout `shape` asks for: as is, or split into attention
    heads and transposed to (batch, heads, sequence, head size) as an attention layer's `view` + `transpose`
    does; None if neither fits."""
    if projected.shape == shape:
        return projected
    if len(shape) == 4 and projected.ndim == 3 and (shape[0], shape[2], shape[1] * shape[3]) == projected.shape:
        return projected.reshape(shape[0], shape[2], shape[1], shape[3]).transpose(0, 2, 1, 3)
    return None


def projected_rows(table: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, shape: tuple) -> np.ndarray | None:
    """A Linear layer applied to a parameter's first rows repeated over the batch, in the layout `shape` asks
    for (`heads_layout`), or None where the sizes do not fit. The exporter folds a projection of a parameter (the
    value projection of a decoder's learnt queries) into a constant; its folding evaluates each ONNX op with
    numpy (onnx.reference): MatMul of the rows by the Transpose of the weight (a transposed view, which
    matters for the bits), then Add of the bias. The same numpy calls here give the same bits; the learnt
    rule is still checked against both exports."""
    batch = shape[0]
    if table.shape[1] != weight.shape[1] or len(shape) not in (3, 4):
        return None
    sequence = shape[1] if len(shape) == 3 else shape[2]
    if table.shape[0] < sequence:
        return None
    table = table[:sequence]  # a table of several query groups (LwDetr's), of which eval reads the first
    projected = np.matmul(np.broadcast_to(table, (batch, *table.shape)), weight.T)
    if bias is not None:
        projected = projected + bias
    return heads_layout(projected, shape)


# elementwise functions the exporter's folding evaluates with numpy after a copy (LwDetr's reference boxes: the
# exp of their width and height half)
_UNARY = {"exp": np.exp}


def copied_elements(source: np.ndarray, target: np.ndarray) -> np.ndarray | None:
    """The position in `source` (flattened) of the element each element of `target` copies bit for bit, or None
    where some element is in no position of the source. Where the source holds a value more than once (likelier
    through `exp`, which maps nearby small values to one), the first position is taken: it may not be the one the
    exporter copied, and then the second export refuses the rule and the class exports fresh. The exporter
    folds a slice, permute or expand of a parameter into a constant (LwDetr's position table without the class
    token's row, reshaped to the patch grid and permuted channels first; the box half of its reference points
    expanded over the batch): every element is a copy of one of the parameter's, so taking the same positions
    from another seed's parameter rebuilds it exactly."""
    if source.dtype != target.dtype or source.size == 0:
        return None
    bits = f"u{source.dtype.itemsize}"
    values, first = np.unique(np.ascontiguousarray(source).reshape(-1).view(bits), return_index=True)
    wanted = np.ascontiguousarray(target).reshape(-1).view(bits)
    at = np.minimum(np.searchsorted(values, wanted), len(values) - 1)
    return first[at] if np.array_equal(values[at], wanted) else None


@dataclass(frozen=True, eq=False)
class _Rule:
    # "same", "transpose", "reshape", "batchnorm_fold", "constant"; for values that depend on the seed and no
    # model tensor holds as they are: "broadcast", "rows" (gathered by `index`), "projection" (of `source`'s
    # rows by the Linear whose weight and bias are `linear`), "copies" (`source`'s elements at the flat
    # positions `index`, then the `unary` function of `_UNARY` where one is named)
    kind: str
    source: str | None
    shape: tuple
    index: tuple[int, ...] | np.ndarray | None = None
    linear: tuple[str, str | None] | None = None
    unary: str | None = None

    def apply(self, state: dict[str, torch.Tensor], folds: dict, constant: np.ndarray | None) -> np.ndarray:
        if self.kind == "constant":
            return constant
        if self.kind == "batchnorm_fold":
            return folds[self.source](state).reshape(self.shape).contiguous().numpy()
        value = state[self.source]
        if self.kind == "broadcast":
            return np.ascontiguousarray(broadcast_of(value, self.shape).numpy())
        if self.kind == "rows":
            return _row_table(value, self.shape[-1])[list(self.index)].reshape(self.shape)
        if self.kind == "copies":
            copied = value.numpy().reshape(-1)[self.index].reshape(self.shape)
            if not self.unary:
                return copied
            with np.errstate(all="ignore"):  # an overflow is the folder's too: it is compared, not warned about
                return _UNARY[self.unary](copied)
        if self.kind == "projection":
            weight, bias = self.linear
            projected = projected_rows(_row_table(value, value.shape[-1]), state[weight].numpy(),
                                       None if bias is None else state[bias].numpy(), self.shape)
            return None if projected is None else np.ascontiguousarray(projected)
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


def _linears(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> list[tuple[str, str | None]]:
    """(weight, bias or None) of every Linear layer, by their names in the model's state (a layer shared by
    several modules is listed under the one name its tensors have there)."""
    found = []
    for path, module in model.named_modules(remove_duplicate=False):
        if not isinstance(module, torch.nn.Linear):
            continue
        weight, bias = f"{path}.weight", f"{path}.bias" if module.bias is not None else None
        if weight in state and (bias is None or bias in state):
            found.append((weight, bias))
    return found


def _explain_seeded(array: np.ndarray, state: dict[str, torch.Tensor],
                    linears: list[tuple[str, str | None]]) -> _Rule | None:
    """A rule for a value that depends on the seed but that no model tensor holds as it is: a parameter
    broadcast, rows gathered from one, a Linear layer's projection of one, or elements copied from one, as
    they are or through an elementwise function (`broadcast_of`, `gathered_rows`, `projected_rows`,
    `copied_elements`, `_UNARY`), in that order, learnt on the template like every other rule."""
    shape, dtype = tuple(array.shape), torch.from_numpy(np.empty(0, array.dtype)).dtype
    sources = [name for name, value in state.items() if value.numel() > 1 and value.dtype == dtype]

    def holds(rule: _Rule) -> bool:
        rebuilt = rule.apply(state, {}, None)
        return rebuilt is not None and np.array_equal(rebuilt, array)

    for source in sources:
        if state[source].numel() < array.size and broadcast_of(state[source], shape) is not None:
            if holds(rule := _Rule("broadcast", source, shape)):
                return rule
    for source in sources if shape else ():  # a 0-d value has no rows
        table = _row_table(state[source], shape[-1])
        index = gathered_rows(table, array) if table is not None else None
        if index is not None:
            return _Rule("rows", source, shape, index)
    for source in sources:
        for weight, bias in linears:
            if state[weight].shape[1] == state[source].shape[-1]:
                if holds(rule := _Rule("projection", source, shape, linear=(weight, bias))):
                    return rule
    for unary in (None, *_UNARY):
        for source in sources:
            value = state[source].numpy()
            with np.errstate(all="ignore"):
                index = copied_elements(_UNARY[unary](value) if unary else value, array)
            if index is not None and holds(rule := _Rule("copies", source, shape, index, unary=unary)):
                return rule
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
    linears = _linears(template_model, state)
    rules, constants = {}, {}
    for name, array in first.items():
        if array.dtype.kind != "f":
            rules[name], constants[name] = _Rule("constant", None, array.shape), array
            continue
        rule = _explain(name, array, state, folds)
        if rule is None or (rule.kind != "batchnorm_fold" and state[rule.source].numel() <= 1):
            rule = None
            if np.array_equal(array, second[name]):  # the same for both seeds: kept as it is
                rule = _Rule("constant", None, array.shape)
                constants[name] = array
            else:  # folded by the exporter from the seed's tensors
                rule = _explain_seeded(array, state, linears)
            if rule is None:
                # said for a report's reader: what an initializer is, then the exporter's name for it
                raise SwapError(f"a weight the exporter stored in the graph (initializer {name}, shape "
                                f"{tuple(array.shape)}) depends on the seed but matches no model tensor (nor a "
                                "broadcast, gathered rows, a Linear projection or copied elements of one), so every "
                                "checked seed is exported afresh")
        rules[name] = rule
    plan = SwapPlan(rules, constants, check_seed)
    rebuilt = plan.initializers(check_model)
    for name, array in second.items():
        if not np.array_equal(rebuilt.get(name, plan.constants.get(name)), array):
            raise SwapError(f"a swapped graph weight (initializer {name}, {rules[name].kind} of {rules[name].source}) "
                            f"differs from a fresh export of seed {check_seed}, so every checked seed is exported "
                            "afresh")
    return plan
