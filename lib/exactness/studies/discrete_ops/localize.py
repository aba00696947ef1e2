"""Where a defect starts: the first module (and ONNX node) at which ONNX Runtime leaves the float64 reference.

Both sides run with every module's output exposed (ORT: the graph exporting every module scope's last value,
`onnx_graph.expose_intermediates`; eager: forward hooks), and eager runs again in float64 with its own float32
choices forced. Walking the modules in the graph's order, the first one where ORT's output holds a non-finite
value that eager's does not, or errs from the float64 reference by more than `engine.outputs.NOISE_FACTOR` times eager's
own error there, is where the defect starts. For a non-finite value, the graph is run once more exposing every
node's output, and the first node that makes one from finite inputs is named with its inputs' ranges; where
that node's traced call (its metadata) reads a value the graph no longer computes, the missing value is named
(`stages.missing_inputs`). Then the pipeline's stages are switched in turn (`stages.locate`): the first stage
whose removal removes the defect, and within it the exporter's rule or ONNX Runtime's pass, with the error
from float64 with and without it and, for a known pass, a plain reproduction run here (`reproductions`).
"""

from __future__ import annotations

import ast
import copy

import numpy as np
import onnx
import torch

from exactness.causes import Stage
from exactness.engine.outputs import NOISE_FACTOR, max_abs, scale_ulp
from exactness.engine.places import (
    BeyondRounding,
    Kind,
    Localization,
    NanInEager,
    NodeMade,
    NonFiniteOutput,
    Rewritten,
    StageProof,
    ValueRange,
)
from exactness.errors import brief
from exactness.runtimes import discrete_recorder, onnx_graph
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED, _tensors
from exactness.runtimes.export_cache import ExportCache
from exactness.studies.discrete_ops import check, reproductions, stages


def module_outputs(model: torch.nn.Module, inputs: dict,
                   force: dict | None = None) -> tuple[dict[str, np.ndarray], list]:
    """Every module's first output tensor (float64 copies), with `force`'s choices; and the forward's records of
    its discrete calls (one forward for both: hooks change no value)."""
    captured: dict[str, np.ndarray] = {}

    def keep(path):
        def hook(module, args, out):  # returns None: a hook that returns a value replaces the output
            tensors = _tensors(out)
            if tensors and path not in captured:
                captured[path] = tensors[0].detach().double().numpy().copy()

        return hook

    handles = [m.register_forward_hook(keep(path)) for path, m in model.named_modules() if path]
    try:
        _, records = discrete_recorder.record(model, inputs, force=force, seed=EXPORT_TEST_FORWARD_SEED)
    finally:
        for handle in handles:
            handle.remove()
    return captured, records


def _range(values: np.ndarray) -> ValueRange | None:
    if not values.size:
        return None
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (float("nan"), float("nan"))
    return ValueRange(str(values.dtype), tuple(values.shape), low, high, int((values == 0).sum()))


def first_nonfinite_node(graph: onnx.ModelProto, initializers: dict | None, inputs: dict, scope: str,
                         nan: bool = False) -> tuple:
    """(node, op type, what it makes) of the first node under `scope` (or anywhere, when none under it) whose output
    holds a non-finite value while every float input it reads is finite (`nan`: a NaN while no input holds one)."""
    def broken(values: np.ndarray) -> np.ndarray:
        return np.isnan(values) if nan else ~np.isfinite(values)

    model = onnx.ModelProto()
    model.CopyFrom(graph if not initializers else onnx_graph.with_initializers(graph, initializers))
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in inferred.graph.value_info}
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in present and name in known:
                model.graph.output.append(known[name])
                present.add(name)
    values = check.run_graph(model, None, inputs)
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    values.update(check.graph_named(model, {k: v.numpy() for k, v in inputs.items()}))
    candidates = []
    for node in model.graph.node:
        outputs = [values[o] for o in node.output if o in values]
        if not any(o.dtype.kind == "f" and broken(o).any() for o in outputs):
            continue
        read = [values.get(i, constants.get(i)) for i in node.input if i]
        if all(r is None or r.dtype.kind != "f" or not broken(r).any() for r in read):
            raw = {p.key: p.value for p in node.metadata_props}.get(onnx_graph.SCOPES_KEY)
            scopes = [s for s in ast.literal_eval(raw)[:-1] if s] if raw else []
            bad = next(o for o in outputs if o.dtype.kind == "f" and broken(o).any())
            made = NodeMade(int(broken(bad).sum()), bad.size, nan, tuple(_range(r) for r in read if r is not None))
            candidates.append((scope in scopes, node.name, node.op_type, made))
    inside = [c for c in candidates if c[0]]
    chosen = (inside or candidates or [(False, "", "", None)])[0]
    return chosen[1:]


def localize(cg: check.ClassGraph, seed: int, built: torch.nn.Module, inputs: dict, cache: ExportCache,
             output: str = "", in_eager: bool = False) -> Localization:
    """The first module where ORT departs from the float64 reference on `seed`, the stage of the pipeline that
    makes it, and a missing value the first non-finite node's traced call reads. `in_eager`: the defect shows in
    eager float32 too (`DefectSign.NAN_IN_EAGER`): where eager first breaks, and no pipeline stage."""
    if in_eager:
        return eager_place(cg, seed, built, inputs, cache)
    found = place(cg, seed, built, inputs, cache, output)
    dynamic = cg.task.shape_mode == "dynamic"
    if found.node:
        try:  # the unoptimized graph only says how the missing value was computed: without it, the rest stands
            unoptimized = cache.export(built, inputs, dynamic, onnx_graph.ExportOptions(optimize=False)).graph.model
        except Exception:
            unoptimized = None
        found.missing = stages.missing_inputs(cg.bare, found.node, unoptimized)
    raw, records = discrete_recorder.record(built, inputs, seed=EXPORT_TEST_FORWARD_SEED)
    eager = {k: v.detach().double().numpy() for k, v in check.flatten_outputs(raw).items() if v.is_floating_point()}
    reference, _ = check._float64_reference(built, inputs, records)
    if reference is None:
        found.no_reference = True
        return found
    wide = {k: v.detach().double().numpy() for k, v in reference.items() if v.is_floating_point()}
    try:
        proof = stages.locate(stages.Measure(built, inputs, dynamic, cache, eager, wide))
    except Exception as error:  # the place found above stands; only the stage is not named, and that is said
        found.switch_error = brief(error)
        return found
    proof.reproduction = reproductions.run(proof.stage, proof.pass_name)
    found.proof = proof
    return found


def _seed_graph(cg: check.ClassGraph, seed: int, built: torch.nn.Module, inputs: dict, cache: ExportCache) -> tuple:
    """(graph, bare graph, initializers) that compute `seed` in ORT: the template's graph with the seed's weights
    swapped in, or the seed's own export where no swap was learnt."""
    if seed != cg.template_seed and cg.plan is not None:
        return cg.full, cg.bare, cg.plan.initializers(built)
    if seed != cg.template_seed:
        graph = cache.export(built, inputs, dynamic=cg.task.shape_mode == "dynamic").graph
        return graph, graph.exposing(()).model, None
    return cg.full, cg.bare, None


def _eager_and_float64(built: torch.nn.Module, inputs: dict) -> tuple[dict, dict, list]:
    """Every module's output in eager float32, and in float64 with eager's own choices forced; eager's records of
    its discrete calls."""
    eager, records = module_outputs(built, inputs)
    wide_model = copy.deepcopy(built).double()
    wide_inputs = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    return eager, module_outputs(wide_model, wide_inputs, check.own_choices(records))[0], records


def eager_place(cg: check.ClassGraph, seed: int, built: torch.nn.Module, inputs: dict,
                cache: ExportCache) -> Localization:
    """Where eager float32 itself first makes a NaN on `seed`: the first module (in the order the modules finish)
    whose output holds one, with the float64 reference's count there (NaN too: the arithmetic itself; none: float32's
    range), and the exported graph's first node that makes a NaN from inputs that hold none (an infinity, a masked
    value, may be among them: a softmax over a fully masked row). No pipeline stage is switched: eager runs no
    export."""
    task = cg.task
    _, bare, initializers = _seed_graph(cg, seed, built, inputs, cache)
    eager, wide, _ = _eager_and_float64(built, inputs)
    found = Localization(task.model, task.shape_mode, seed, "", Kind.NAN_IN_EAGER, proof=StageProof(Stage.MODEL,
                                                                                                   provider=""))
    for label, mine in eager.items():
        broken = int(np.isnan(mine).sum()) if mine.dtype.kind == "f" else 0
        if not broken:
            continue
        reference = wide.get(label)
        nans = None if reference is None or reference.shape != mine.shape else int(np.isnan(reference).sum())
        found.module, found.shows = label, NanInEager(broken, mine.size, nans)
        break
    found.node, found.op_type, found.made = first_nonfinite_node(bare, initializers, inputs, found.module, nan=True)
    return found


def place(cg: check.ClassGraph, seed: int, built: torch.nn.Module, inputs: dict, cache: ExportCache,
          output: str = "") -> Localization:
    """The first module where ORT departs from the float64 reference on `seed`."""
    task = cg.task
    graph, bare, initializers = _seed_graph(cg, seed, built, inputs, cache)
    full = graph.exposing(set(graph.intermediates))
    ort = check.run_graph(full.model, initializers, inputs)
    eager, wide, records = _eager_and_float64(built, inputs)
    for label, value in graph.intermediates.items():
        if label not in eager or label not in wide or value not in ort:
            continue
        mine, theirs, reference = eager[label], np.asarray(ort[value]), wide[label]
        if mine.shape != theirs.shape or mine.dtype.kind != "f" or reference.shape != mine.shape:
            continue
        theirs = theirs.astype(np.float64)
        broken = int((np.isfinite(mine) & ~np.isfinite(theirs)).sum())
        if broken:
            node, op_type, made = first_nonfinite_node(bare, initializers, inputs, label)
            return Localization(task.model, task.shape_mode, seed, label, Kind.NON_FINITE, node, op_type,
                                NonFiniteOutput(broken, mine.size), made)
        eager_err, ort_err = max_abs(mine, reference), max_abs(theirs, reference)
        bound = NOISE_FACTOR * max(eager_err, scale_ulp(reference))
        if ort_err > bound:
            return Localization(task.model, task.shape_mode, seed, label, Kind.BEYOND_ROUNDING,
                                shows=BeyondRounding(ort_err / max(eager_err, scale_ulp(reference))),
                                eager_err=eager_err, ort_err=ort_err, bound=bound)
    node, op_type, made = first_nonfinite_node(bare, initializers, inputs, "")
    if node:
        return Localization(task.model, task.shape_mode, seed, "", Kind.NON_FINITE, node, op_type, made=made)
    if output:
        found = by_optimization(graph, bare, initializers, inputs, built, records, output)
        if found is not None:
            module, rewritten, eager_err = found
            return Localization(task.model, task.shape_mode, seed, module, Kind.OPTIMIZATION, shows=rewritten,
                                eager_err=eager_err, ort_err=dict(rewritten.errors)[rewritten.level],
                                bound=rewritten.bound)
    return Localization(task.model, task.shape_mode, seed, "", Kind.BEYOND_ROUNDING)


def by_optimization(graph: onnx_graph.ExportedGraph, bare: onnx.ModelProto, initializers, inputs, built, records,
                    output: str) -> tuple | None:
    """When the graph exposing every module's output agrees with float64 but the bare graph does not, an ORT
    rewrite across module boundaries makes the difference: the lowest optimization level that shows it, and the
    first module whose output, exposed alone, removes it (the rewrite reads it): (that module or "", what the
    levels show, eager's error) or None."""
    eager = check.flatten_outputs(discrete_recorder.record(built, inputs, seed=EXPORT_TEST_FORWARD_SEED)[0])
    reference, _ = check._float64_reference(built, inputs, records)
    mine = check.eager_name(output, eager)
    if reference is None or mine is None or mine not in reference:
        return None
    wide, narrow = reference[mine].detach().double().numpy(), eager[mine].detach().double().numpy()
    eager_err = max_abs(narrow, wide)
    bound = NOISE_FACTOR * max(eager_err, scale_ulp(wide))

    def error(model: onnx.ModelProto, level: str) -> float:
        runner = onnx_graph.OrtRunner(onnx_graph.ExportedGraph(model, [o.name for o in model.graph.output]),
                                      initializers, optimization=level, intra_op_threads=1)
        got = runner.run(check.graph_named(model, inputs))[output]
        return max_abs(np.asarray(got, np.float64).reshape(wide.shape), wide)

    errors = {level: error(bare, level) for level in onnx_graph.LEVELS}
    failing = [level for level in onnx_graph.LEVELS if errors[level] > bound]
    if not failing:
        return None
    level = failing[0]
    rewritten = Rewritten(level, output, tuple((name, errors[name]) for name in onnx_graph.LEVELS), bound)
    removes = next((label for label in graph.intermediates if error(graph.exposing({label}).model, level) <= bound), "")
    return removes, rewritten, eager_err
