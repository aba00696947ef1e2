"""One class: export once per shape mode, scan the graph, then per seed run eager under the recorder and
ONNX Runtime on the same weights, measure every discrete op's margins and flips, and re-run eager with ORT's
choices forced (the counterfactual)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import torch

from exactness.compare.scale import float32_ulp
from exactness.models import tiny_subjects
from exactness.runtimes import discrete_recorder, discrete_scan, onnx_graph, weight_swap
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED
from exactness.studies.discrete_ops import margins as margins_of


@dataclass
class ClassGraph:
    """What every seed of one (class, shape mode) shares: the graph, its discrete ops, and the swap."""

    model: str
    shape_mode: str
    bare: onnx.ModelProto  # the graph as the export test runs it
    exposed: onnx.ModelProto  # the same, also returning what each discrete op read and chose
    outputs: list[str]
    ops: list[discrete_scan.DiscreteOp]
    plan: weight_swap.SwapPlan | None = None
    template_seed: int = 0
    exposure_ok: bool = False  # exposing leaves every output bit-identical to the bare graph (template seed)
    status: dict = field(default_factory=dict)  # exports, export seconds, swap status


def export(model: str, seed: int, shape_mode: str):
    built = tiny_subjects.build(model, seed)
    inputs = tiny_subjects.inputs(model, seed)
    return built, inputs, onnx_graph.export(built, inputs, dynamic=shape_mode == "dynamic")


def prepare(model: str, shape_mode: str, seeds: list[int]) -> ClassGraph:
    """Export the first seed, scan it; export the second and learn the weight swap (verified on it)."""
    built, inputs, graph = export(model, seeds[0], shape_mode)
    cg = from_graph(model, shape_mode, seeds[0], graph, inputs)
    if len(seeds) > 1:
        other, other_inputs, second = export(model, seeds[1], shape_mode)
        cg.status["exports"] += 1
        cg.status["export_seconds"] += second.export_seconds
        try:
            cg.plan = weight_swap.learn(graph, built, second, other, seeds[1])
            cg.status["swap"] = f"verified against a fresh export of seed {seeds[1]}"
        except weight_swap.SwapError as error:
            cg.status["swap"] = f"disabled: {error}"
    return cg


def from_graph(model: str, shape_mode: str, seed: int, graph: onnx_graph.ExportedGraph, inputs: dict) -> ClassGraph:
    """Scan an exported graph, expose what its discrete ops read and chose, and check on `inputs` that the
    exposure leaves every output bit-identical to the bare graph."""
    bare = graph.exposing(()).model
    ops = discrete_scan.scan(bare)
    types = discrete_scan.value_types(bare)
    read = [name for op in ops for name in [*op.inputs, *op.outputs]]
    exposed = discrete_scan.exposing(bare, read, types)
    cg = ClassGraph(model, shape_mode, bare, exposed, list(graph.outputs), ops, template_seed=seed)
    cg.status = {"exports": 1, "export_seconds": graph.export_seconds, "swap": "one seed: no swap needed"}
    plain = _run(bare, None, inputs)
    shown = _run(exposed, None, inputs)
    cg.exposure_ok = all(np.array_equal(plain[n], shown[n], equal_nan=True) for n in cg.outputs)
    return cg


def graph_named(model: onnx.ModelProto, inputs: dict) -> dict:
    """The inputs under the graph's input names: the exporter prefixes an input with `input.` when an output
    has the same name (MMGroundingDino returns its `input_ids`, so the graph reads `input.input_ids`)."""
    names = {i.name for i in model.graph.input}
    return {(f"input.{k}" if k not in names and f"input.{k}" in names else k): v for k, v in inputs.items()}


def _run(model: onnx.ModelProto, initializers: dict | None, inputs: dict) -> dict[str, np.ndarray]:
    graph = onnx_graph.ExportedGraph(model, [o.name for o in model.graph.output])
    return onnx_graph.OrtRunner(graph, initializers, intra_op_threads=1).run(graph_named(model, inputs))


def flatten_outputs(output) -> dict[str, torch.Tensor]:
    """A model's outputs under the graph's names: tuples become `name.0`, `name.1`, ... (as the exporter
    names them); None is left out."""
    items = output.items() if hasattr(output, "items") else [("output", output)]
    flat = {}

    def add(name, value):
        if isinstance(value, torch.Tensor):
            flat[name] = value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                add(f"{name}.{i}", item)

    for name, value in items:
        add(name, value)
    return flat


def output_difference(actual: np.ndarray, expected: torch.Tensor) -> dict:
    """max |diff| and the same in ulps of the expected tensor's scale (1 float32 ulp of its RMS)."""
    wanted = expected.detach().double().numpy()
    got = np.asarray(actual, dtype=np.float64).reshape(wanted.shape) if np.size(actual) == wanted.size else None
    if got is None:
        return {"max_abs_diff": float("inf"), "max_ulps_of_scale": float("inf"), "mismatched": int(wanted.size)}
    diff = np.abs(got - wanted)
    diff = np.where(np.isnan(got) & np.isnan(wanted), 0.0, diff)
    largest = float(np.nanmax(diff)) if diff.size else 0.0
    rms = float(np.sqrt(np.mean(np.square(wanted)))) if wanted.size else 0.0
    ulps = largest / float(float32_ulp(rms)) if expected.is_floating_point() and rms > 0 else float("nan")
    return {"max_abs_diff": largest, "max_ulps_of_scale": 0.0 if largest == 0 else ulps,
            "mismatched": int((diff > 1e-3 + 1e-3 * np.abs(wanted)).sum())}


def _selection_onnx(op: discrete_scan.DiscreteOp, node: onnx.NodeProto, values: dict) -> margins_of.Selection | None:
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if op.category in ("argmax", "argmin"):
        return margins_of.Selection(int(attributes.get("axis", 0)), 1, op.category == "argmax")
    if op.category == "topk":
        k = int(np.asarray(values[node.input[1]]).reshape(-1)[0])
        return margins_of.Selection(int(attributes.get("axis", -1)), k, bool(attributes.get("largest", 1)))
    return None


def _arg(record: discrete_recorder.Record, position: int, name: str, default):
    if len(record.args) > position and record.args[position] is not None:
        return record.args[position]
    return record.kwargs.get(name, default)


def selection_eager(record: discrete_recorder.Record) -> margins_of.Selection | None:
    op, n = record.op, record.inputs[0]
    if op in ("aten.argmax", "aten.argmin", "aten.max.dim", "aten.min.dim"):
        return margins_of.Selection(_arg(record, 1, "dim", None), 1, op in ("aten.argmax", "aten.max.dim"))
    if op == "aten.topk":
        return margins_of.Selection(_arg(record, 2, "dim", -1), int(record.args[1]), bool(_arg(record, 3, "largest",
                                                                                               True)))
    if op == "aten.sort":
        dim = _arg(record, 1, "dim", -1)
        return margins_of.Selection(dim, n.shape[dim] if n.dim() else 1, bool(_arg(record, 2, "descending", False)))
    return None


def eager_choice(record: discrete_recorder.Record):
    out = record.output
    return (out[1] if isinstance(out, (tuple, list)) else out).numpy()


# (aten op, ONNX node) pairs where the node computes the negation of eager's choice: ONNX has no NotEqual, so
# torch's `ne` exports as Not(Equal) and the scan finds the Equal.
NEGATED = {("aten.ne", "Equal")}


def ort_choice(op: discrete_scan.DiscreteOp, values: dict, record: discrete_recorder.Record | None = None):
    """ORT's choice at `op`, in the terms of eager's `record` (the call it was matched to)."""
    chosen = values[op.outputs[1] if op.op_type == "TopK" else op.outputs[0]]
    return np.logical_not(chosen) if record is not None and (record.op, op.op_type) in NEGATED else chosen


def forcing(record: discrete_recorder.Record, choice: np.ndarray):
    """A replacement that makes eager's op choose what ORT chose; values follow from eager's own input."""
    chosen = torch.from_numpy(np.array(choice))
    if record.category == "nonzero":
        return lambda args, kwargs, out: chosen.T.contiguous().to(out.dtype)
    if record.category in ("compare", "rounding") or record.op in ("aten.argmax", "aten.argmin"):
        return lambda args, kwargs, out: chosen.reshape(out.shape).to(out.dtype)
    selection = selection_eager(record)

    def select(args, kwargs, out):
        indices = chosen.reshape(out[1].shape).to(out[1].dtype)
        dim = selection.axis
        keep = record.op not in ("aten.max.dim", "aten.min.dim") or _arg(record, 2, "keepdim", False)
        gathered = args[0].gather(dim, indices if keep else indices.unsqueeze(dim))
        return type(out)((gathered if keep else gathered.squeeze(dim), indices))

    return select


def _read_ort(op: discrete_scan.DiscreteOp, values: dict) -> list:
    names = op.inputs[:2] if op.category == "compare" else op.inputs[:1]
    return [values[name] for name in names]


def _read_eager(record: discrete_recorder.Record) -> list:
    return [v.double().numpy() if isinstance(v, torch.Tensor) else v for v in record.inputs[:2]]


def check_seed(cg: ClassGraph, seed: int, built: torch.nn.Module | None = None, inputs: dict | None = None) -> dict:
    """Eager (recorded) and ORT on one seed: rows for the margins, the outputs and the counterfactual.
    `built`, `inputs`: a model and inputs of your own (the graph's template seed), instead of the registry's."""
    began = time.monotonic()
    built = built if built is not None else tiny_subjects.build(cg.model, seed)
    inputs = inputs if inputs is not None else tiny_subjects.inputs(cg.model, seed)
    raw, records = discrete_recorder.record(built, inputs, seed=EXPORT_TEST_FORWARD_SEED)
    eager = flatten_outputs(raw)
    fresh = cg.plan is None and seed != cg.template_seed
    if fresh:  # no learnt swap: this seed gets its own export (its cost is in the row)
        _, _, graph = export(cg.model, seed, cg.shape_mode)
        bare = graph.exposing(()).model
        exposed = discrete_scan.exposing(bare, [n for op in cg.ops for n in [*op.inputs, *op.outputs]])
        initializers = None
    else:
        bare, exposed = cg.bare, cg.exposed
        initializers = cg.plan.initializers(built) if cg.plan is not None and seed != cg.template_seed else None
    values = {**discrete_scan.constant_values(exposed.graph), **inputs_as_numpy(graph_named(exposed, inputs)),
              **_run(exposed, initializers, inputs)}
    produced = values if cg.exposure_ok else _run(bare, initializers, inputs)
    nodes = {node.name: node for node in exposed.graph.node}
    matches = discrete_recorder.match(cg.ops, records)
    labels = {"model": cg.model, "shape_mode": cg.shape_mode, "seed": seed}
    margin_rows, force = [], {}
    for op in cg.ops:
        m = matches[op.node]
        rec = records[m.record] if m.record is not None else None
        row = {**labels, "node": op.node, "op_type": op.op_type, "category": op.category, "matched_by": m.how,
               "read_noise_ulps": float("nan")}
        if op.category == "random":
            margin_rows.append({**row, "flipped": float("nan"), "decisions": 0})
            continue
        ort_sel = _selection_onnx(op, nodes[op.node], values)
        ort_margins = margins_of.margins(op.category, op.op_type, _read_ort(op, values), ort_sel)
        row.update({f"ort_{k}": v for k, v in ort_margins.summary().items() if k != "decisions"})
        if rec is not None:
            read_eager, read_ort = _read_eager(rec)[0], np.asarray(_read_ort(op, values)[0])
            same_size = np.size(read_eager) == read_ort.size
            diff = float(np.max(np.abs(read_eager.reshape(-1) - read_ort.reshape(-1).astype(np.float64)))) \
                if same_size and read_ort.size else float("inf")
            row["read_max_diff"] = diff
            largest = float(np.max(np.abs(read_eager), initial=0))
            row["match_verified"] = bool(same_size and diff <= 1e-3 + 1e-3 * largest)
            sel = selection_eager(rec)
            row["read_noise_ulps"] = margins_of.read_noise_ulps(op.category, _read_eager(rec), _read_ort(op, values),
                                                                sel) if same_size else float("nan")
            # a choice is compared (and forced) only where the match is trusted: what both sides read agrees, or
            # the exporter's own name for the call found it (its reads may differ after an upstream flip); a
            # match by scope and order alone that the values do not confirm may be another call altogether, so
            # its margins are ORT's own
            row["match_trusted"] = row["match_verified"] or (m.how == "traced call number" and same_size)
            read = _read_eager(rec) if row["match_trusted"] else None
            row.update((margins_of.margins(op.category, op.op_type, read, sel) if read else ort_margins).summary())
            if row["match_trusted"] or (op.category == "nonzero" and m.how == "traced call number"):
                ort = ort_choice(op, values, rec)
                row["flipped"] = margins_of.flipped(op.category, eager_choice(rec), ort, sel)
                force[(rec.op, rec.call)] = forcing(rec, ort)
            else:
                row["flipped"] = float("nan")
        else:
            row.update(ort_margins.summary())
            row["flipped"] = float("nan")
        margin_rows.append(row)
    out_rows = []
    for name in cg.outputs:
        mine = name if name in eager else name.removeprefix("output.")  # renamed as its clashing input was
        if mine in eager and name in produced:
            out_rows.append({**labels, "output": name, **output_difference(produced[name], eager[mine])})
    any_flip = any(r.get("flipped", 0) > 0 for r in margin_rows if r.get("flipped") == r.get("flipped"))
    if any_flip:  # eager again, with ORT's choices at every matched op
        forced_raw, _ = discrete_recorder.record(built, inputs, force=force, seed=EXPORT_TEST_FORWARD_SEED)
        forced = flatten_outputs(forced_raw)
        for row in out_rows:
            name = row["output"]
            after = output_difference(produced[name], forced[name if name in forced else name.removeprefix("output.")])
            row.update({"forced_max_abs_diff": after["max_abs_diff"], "forced_max_ulps_of_scale":
                        after["max_ulps_of_scale"], "forced_mismatched": after["mismatched"]})
    for row in out_rows:
        row["seed_flipped"] = any_flip
    return {"margins": margin_rows, "outputs": out_rows,
            "seed": {**labels, "fresh_export": fresh, "seconds": time.monotonic() - began, "flipped": any_flip,
                     "graph": "fresh export" if fresh else ("swapped weights" if initializers else "template")}}


def inputs_as_numpy(inputs: dict) -> dict[str, np.ndarray]:
    return {name: tensor.numpy() for name, tensor in inputs.items()}
