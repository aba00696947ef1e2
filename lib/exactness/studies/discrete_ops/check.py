"""One class: export once per shape mode (cached), scan the graph, then per seed run eager under the recorder,
ONNX Runtime on the same weights and eager in float64 with eager's own choices forced (the reference), measure
every discrete op's margins and flips, apply the export test's rule, prove each output's agreement as float
noise against the reference, and re-run eager with ORT's choices forced (the counterfactual)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import torch

from exactness.compare import export_rule
from exactness.engine import margins as margins_of
from exactness.engine.outputs import compare_forced, compare_output
from exactness.engine.rows import ClassTask, GraphRow, MarginRow, OutputRow, ScreenRow, SeedRow
from exactness.errors import brief
from exactness.runtimes import discrete_recorder, discrete_scan, onnx_graph, weight_swap
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED, flatten_outputs
from exactness.runtimes.export_cache import ExportCache
from exactness.runtimes.graph_pool import Case, GraphPool


@dataclass
class ClassGraph:
    """What every seed of one (class, shape mode) shares: the graph, its discrete ops, and the swap."""

    task: ClassTask
    bare: onnx.ModelProto  # the graph as the export test runs it
    exposed: onnx.ModelProto  # the same, also returning what each discrete op read and chose
    full: onnx_graph.ExportedGraph | None  # the same, returning every module's output (localization only)
    outputs: list[str]
    ops: list[discrete_scan.DiscreteOp]
    plan: weight_swap.SwapPlan | None = None
    template_seed: int = 0
    exposure_ok: bool = False  # exposing leaves every output bit-identical to the bare graph (template seed)
    row: GraphRow = field(default_factory=lambda: GraphRow("", ""))


def counted(op: discrete_scan.DiscreteOp) -> bool:
    """An op whose choice can flip on its own and reaches an output: the ones the verdict counts."""
    return op.on_output_path and op.can_flip


def prepare(task: ClassTask, seeds: list[int], cache: ExportCache, make) -> ClassGraph:
    """Export the first seed and scan it; export the second and learn the weight swap from the two, verified on
    it, as every study learns it (`GraphPool`). `make(seed)`: the seed's `sources.Made`, a fresh model."""
    cases = []
    for seed in dict.fromkeys(seeds[:2]):
        made = make(seed)
        found = cache.export(made.model, made.inputs, dynamic=task.shape_mode == "dynamic")
        cases.append(Case(seed, made.model, made.inputs, found.graph, found.cached))
    pool = GraphPool(task.model, task.shape_mode, fed=False).prepare(*cases)
    cg = from_graph(task, cases[0].seed, cases[0].graph, cases[0].inputs)
    cg.plan = pool.plan
    cg.row.exports, cg.row.cached_exports = pool.exports, pool.cached_exports
    cg.row.export_seconds = pool.export_seconds
    cg.row.swap = pool.swap_status if len(cases) > 1 else "one seed: no swap needed"
    return cg


class OutputNamesError(ValueError):
    """A graph output that no eager output answers to: nothing would compare it, and the test would pass on it."""


def check_output_names(outputs: list[str], eager: dict) -> None:
    """Every graph output has an eager output of the same name (`flatten_outputs`), or the class stops here.
    `eager`: a check's own eager outputs (a forward run only for this check would change what a process's later
    classes compute: measured on RT-DETR then PPDocLayoutV2, whose float64 reference then failed)."""
    unanswered = [name for name in outputs if eager_name(name, eager) is None]
    if unanswered:
        raise OutputNamesError(f"the exported graph's outputs {unanswered} have no eager output of that name (eager "
                               f"returns {sorted(eager)}), so nothing would compare them")


def from_graph(task: ClassTask, seed: int, graph: onnx_graph.ExportedGraph, inputs: dict) -> ClassGraph:
    """Scan an exported graph, expose what its discrete ops read and chose, and check on `inputs` that the
    exposure leaves every output bit-identical to the bare graph."""
    bare = graph.exposing(()).model
    ops = discrete_scan.scan(bare)
    exposed = discrete_scan.exposing(bare, _read_names(ops), discrete_scan.value_types(bare))
    cg = ClassGraph(task, bare, exposed, graph, list(graph.outputs), ops, template_seed=seed,
                    row=GraphRow(task.model, task.shape_mode, discrete_ops=len(ops), outputs=len(graph.outputs)))
    plain, shown = run_graph(bare, None, inputs), run_graph(exposed, None, inputs)
    cg.exposure_ok = cg.row.exposure_ok = all(np.array_equal(plain[n], shown[n], equal_nan=True) for n in cg.outputs)
    return cg


def _read_names(ops) -> list[str]:
    return [name for op in ops for name in [*op.inputs, *op.outputs]]


def graph_named(model: onnx.ModelProto, inputs: dict) -> dict:
    """The inputs under the graph's input names: the exporter prefixes an input with `input.` when an output
    has the same name (MMGroundingDino returns its `input_ids`, so the graph reads `input.input_ids`)."""
    names = {i.name for i in model.graph.input}
    return {(f"input.{k}" if k not in names and f"input.{k}" in names else k): v for k, v in inputs.items()}


def run_graph(model: onnx.ModelProto, initializers: dict | None, inputs: dict) -> dict[str, np.ndarray]:
    graph = onnx_graph.ExportedGraph(model, [o.name for o in model.graph.output])
    return onnx_graph.OrtRunner(graph, initializers, intra_op_threads=1).run(graph_named(model, inputs))


def eager_name(graph_name: str, eager: dict) -> str | None:
    """Eager's name for a graph output (an output renamed as its clashing input was loses `output.`)."""
    if graph_name in eager:
        return graph_name
    plain = graph_name.removeprefix("output.")
    return plain if plain in eager else None


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
    """A replacement that makes an op choose `choice`; values follow from the op's own input."""
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


def _drawn(record: discrete_recorder.Record):
    """A replacement that makes a random op draw what this record drew (in place where the op draws in place)."""
    drawn = record.output

    def replace(args, kwargs, out):
        value = drawn.to(out.dtype)
        if record.op.endswith("_") and isinstance(args[0], torch.Tensor):
            args[0].copy_(value)
            return args[0]
        return value

    return replace


def own_choices(records: list[discrete_recorder.Record]) -> dict:
    """Replacements that make another run of the same forward (float64) choose, and draw, what these records
    chose and drew. A nonzero's choice is forced in ORT's layout (one row per dimension), as `forcing` takes it."""
    return {(r.op, r.call): _drawn(r) if r.category == "random" else
            forcing(r, r.output.numpy().T if r.category == "nonzero" else eager_choice(r)) for r in records}


def _read_ort(op: discrete_scan.DiscreteOp, values: dict) -> list:
    names = op.inputs[:2] if op.category == "compare" else op.inputs[:1]
    return [values[name] for name in names]


def _read_eager(record: discrete_recorder.Record) -> list:
    return [v.double().numpy() if isinstance(v, torch.Tensor) else v for v in record.inputs[:2]]


def screen_rows(task: ClassTask, seed: int, ops, records, keys: dict[str, tuple[str, int]] | None = None,
                recorder: str = "dispatch") -> list[ScreenRow]:
    """Eager's margins at every counted op matched to an eager call: what the screen keeps of a forward.
    `keys`: each node's (op, call), matched once on a whole recording, for records of those calls alone."""
    rows = []
    if keys is None:
        matches = discrete_recorder.match(ops, records)
        made = {op.node: records[matches[op.node].record] for op in ops if matches[op.node].record is not None}
    else:
        by_key = {(r.op, r.call): r for r in records}
        made = {node: by_key[key] for node, key in keys.items() if key in by_key}
    for op in ops:
        if not counted(op) or op.category == "random" or op.node not in made:
            continue
        record = made[op.node]
        read, selection = _read_eager(record), selection_eager(record)
        found = margins_of.margins(op.category, op.op_type, read, selection)
        summary = found.summary()
        rows.append(ScreenRow(task.model, task.shape_mode, seed, op.node, summary["decisions"], summary["min_margin"],
                              summary["min_margin_ulps"], summary["exact_ties"],
                              int((~margins_of.finite_decisions(op.category, read, selection)).sum()), recorder))
    return rows


@dataclass
class SeedCheck:
    margins: list[MarginRow]
    outputs: list[OutputRow]
    seed: SeedRow


def _float64_reference(built: torch.nn.Module, inputs: dict, records) -> tuple[dict | None, str]:
    """Eager in float64 with eager's own discrete choices forced: what float32 arithmetic approximates."""
    force = own_choices(records)
    wide_inputs = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                   for k, v in inputs.items()}

    def run(wide):
        return discrete_recorder.record(wide, wide_inputs, force=force, seed=EXPORT_TEST_FORWARD_SEED)

    try:
        raw, wide_records = run(copy.deepcopy(built).double())
    except Exception as error:  # a model that does not run in float64 has no reference: said, not hidden
        return None, f"no float64 reference ({brief(error)})"
    if [(r.op, r.call, r.forced) for r in wide_records] != [(r.op, r.call, True) for r in records]:
        return None, "no float64 reference: its forward made other discrete calls than float32's"
    return flatten_outputs(raw), ("float64, eager's choices forced" if force else "float64")


def check_seed(cg: ClassGraph, seed: int, built: torch.nn.Module, inputs: dict, cache: ExportCache,
               atol: float, rtol: float, phase: str,
               judging: export_rule.Rule = export_rule.BUILT_IN) -> SeedCheck:
    """Eager (recorded), ORT and the float64 reference on one seed: its margin, output and seed rows; the seed's
    pass/fail by `judging` (the built-in replica of the export test's check, or a checkout's own)."""
    began = time.monotonic()
    raw, records = discrete_recorder.record(built, inputs, seed=EXPORT_TEST_FORWARD_SEED)
    eager = flatten_outputs(raw)
    fresh = cg.plan is None and seed != cg.template_seed
    if fresh:  # no learnt swap: this seed gets its own export (its cost is in the graphs table)
        graph = cache.export(built, inputs, dynamic=cg.task.shape_mode == "dynamic").graph
        bare = graph.exposing(()).model
        exposed = discrete_scan.exposing(bare, _read_names(cg.ops))
        initializers = None
    else:
        bare, exposed = cg.bare, cg.exposed
        initializers = cg.plan.initializers(built) if cg.plan is not None and seed != cg.template_seed else None
    values = {**discrete_scan.constant_values(exposed.graph),
              **{k: v.numpy() for k, v in graph_named(exposed, inputs).items()}, **run_graph(exposed, initializers,
                                                                                          inputs)}
    produced = values if cg.exposure_ok else run_graph(bare, initializers, inputs)
    nodes = {node.name: node for node in exposed.graph.node}
    matches = discrete_recorder.match(cg.ops, records)
    task = cg.task
    margin_rows, force, flipped_outputs = [], {}, set()
    for op in cg.ops:
        m = matches[op.node]
        rec = records[m.record] if m.record is not None else None
        row = MarginRow(task.model, task.shape_mode, seed, op.node, op.op_type, op.category, m.how)
        if op.category == "random":
            margin_rows.append(row)
            continue
        ort_read = _read_ort(op, values)
        ort_sel = _selection_onnx(op, nodes[op.node], values)
        if rec is None:  # no eager call matched: ORT's margins stand for the op's
            ort_margins, _ = margins_of.fill_ort(row, op.category, op.op_type, ort_read, ort_sel)
            row.decisions, row.min_margin, row.min_margin_ulps = (ort_margins["decisions"], row.ort_min_margin,
                                                                  row.ort_min_margin_ulps)
            row.exact_ties = row.ort_exact_ties
            margin_rows.append(row)
            continue
        eager_read, sel = _read_eager(rec), selection_eager(rec)
        eager_margins, reads = margins_of.fill_reads(row, op.category, op.op_type, eager_read, ort_read, sel,
                                                     ort_sel, atol, rtol)
        same_size = np.size(eager_read[0]) == np.asarray(ort_read[0]).size
        # a choice is compared (and forced) only where the match is trusted: what both sides read agrees, or
        # the exporter's own name for the call found it (its reads may differ after an upstream flip); a match
        # by scope and order alone that the values do not confirm may be another call altogether
        row.match_trusted = row.match_verified or (m.how == "traced call number" and same_size)
        if row.match_trusted or (op.category == "nonzero" and m.how == "traced call number"):
            ort = ort_choice(op, values, rec)
            changed = margins_of.flipped_decisions(op.category, eager_choice(rec), ort, sel,
                                                   shape=np.shape(eager_read[0]))
            margins_of.fill_flips(row, changed, eager_margins, reads)
            if changed.any():
                force[(rec.op, rec.call)] = forcing(rec, ort)
                flipped_outputs |= set(op.reaches_outputs)
        margin_rows.append(row)
    counted_nodes = {op.node for op in cg.ops if counted(op)}
    drawn_outputs = {name for op in cg.ops if op.category == "random" for name in op.reaches_outputs}
    flipped_counted = any(r.flipped > 0 for r in margin_rows if r.node in counted_nodes)
    stray = not flipped_counted and any(r.flipped > 0 for r in margin_rows if r.node not in counted_nodes)
    reference, reference_note = _float64_reference(built, inputs, records)
    check_output_names(cg.outputs, eager)
    pairs = [(name, eager_name(name, eager)) for name in cg.outputs]
    pairs = [(graph, mine) for graph, mine in pairs if mine is not None and graph in produced]
    # each output counted at the tolerances the judging rule compares at (a checkout's rule widens them where an
    # output is half precision), so that the rule judged from these counts is the rule applied to the tensors
    count_atol, count_rtol = judging.tolerances({g: eager[m] for g, m in pairs}, atol, rtol)
    out_rows = []
    for graph_output, mine in pairs:
        row = OutputRow(task.model, task.shape_mode, seed, graph_output, eager[mine].is_floating_point(), True,
                        reached_by_flip=graph_output in flipped_outputs, reached_by_draw=graph_output in drawn_outputs)
        compare_output(row, produced[graph_output], eager[mine],
                       reference.get(mine) if reference is not None else None, count_atol, count_rtol)
        out_rows.append(row)
    if force:  # eager again, with ORT's choices at every op that flipped
        forced_raw, forced_records = discrete_recorder.record(built, inputs, force=force,
                                                              seed=EXPORT_TEST_FORWARD_SEED)
        if sum(r.forced for r in forced_records) != len(force):  # a choice not forced explains nothing
            forced_raw = raw
        forced = flatten_outputs(forced_raw)
        for row, (graph_output, mine) in zip(out_rows, pairs, strict=True):
            if not row.reached_by_flip or mine not in forced or not row.same_shape:
                continue
            compare_forced(row, produced[graph_output], forced[mine], count_atol, count_rtol)
    rule = judging.applied({g: torch.from_numpy(np.asarray(produced[g])).to(eager[m].dtype) for g, m in pairs},
                           {g: eager[m] for g, m in pairs}, atol=atol, rtol=rtol) if pairs else None
    seed_row = SeedRow(task.model, task.shape_mode, seed, phase,
                       "fresh export" if fresh else ("swapped weights" if initializers else "template"),
                       flipped_counted, stray, bool(rule) if rule is not None else True,
                       (rule.first_mismatch or "") if rule is not None else "", bool(rule and rule.forgiven),
                       ", ".join(rule.never_compared) if rule is not None else "", reference_note,
                       time.monotonic() - began)
    return SeedCheck(margin_rows, out_rows, seed_row)
