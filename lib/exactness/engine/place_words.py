"""Where a defect starts, in words: every sentence about a localization (`places`), written from its numbers."""

from __future__ import annotations

import pandas as pd

from exactness.causes import Stage
from exactness.engine.places import (
    REFERENCE,
    BeyondRounding,
    Config,
    Kind,
    Localization,
    MissingInput,
    NanInEager,
    NodeMade,
    NonFiniteOutput,
    Remedy,
    Reproduction,
    Rewritten,
    StageProof,
    Symptom,
    ValueRange,
)

NOT_MEASURED = "not measured"  # a proof built by hand may lack a measurement `stages.locate` always takes


def config(c: Config | None) -> str:
    if c is None:
        return NOT_MEASURED
    if c.runtime == REFERENCE:
        return f"export {c.export}, run in {REFERENCE}"
    ort = f"ORT level '{c.level}'" + (f" with {', '.join(c.disabled)} disabled" if c.disabled else "")
    return f"export {c.export}, {ort}"


def symptom(s: Symptom | None) -> str:
    if s is None:
        return NOT_MEASURED
    nonfinite = f", {s.nonfinite:,} values non-finite where float64's are finite" if s.nonfinite else ""
    return f"{s.output} errs {s.error:.3g} from float64 ({s.over:.3g} times its bound){nonfinite}"


def proof(p: StageProof) -> str:
    """The stage's proof: the stage, the pass, the errors with and without it, how it was found."""
    if p.stage is Stage.NOT_SHOWN or p.with_pass is None:
        return p.stage.value
    base = f"with it {symptom(p.with_pass)}"
    without = symptom(p.without_at_output)
    if p.stage in (Stage.TRANSLATION, Stage.ORT_KERNELS, Stage.UNSEPARATED):
        bare = (f"exported with optimize=False and run with ORT's optimizations off ({p.provider}, the only "
                f"execution provider here) it still shows: {symptom(p.without_pass)}")
        if p.stage is Stage.UNSEPARATED:
            return f"{p.stage.value}: {bare}; {REFERENCE} could not run the graph ({p.reference_error})"
        seen = "shows it too" if p.stage is Stage.TRANSLATION else "does not"
        return f"{p.stage.value}: {bare}; the same graph in {REFERENCE} {seen}: {symptom(p.reference)}"
    kind, kinds = ("rule", "rules") if p.stage is Stage.EXPORT_OPTIMIZER else ("pass", "passes")
    searched = f"bisected over {p.candidates} {kinds} in {len(p.trials)} trials"
    stage_off = config(p.without)
    if not p.pass_name:
        return (f"{p.stage.value}: {symptom(p.with_pass)}; without the stage ({stage_off}), {without}; no "
                f"single {kind} removes it ({searched})")
    return f"{p.stage.value}, {kind} {p.pass_name}: {base}; without it alone ({stage_off}), {without} ({searched})"


def reproduction(r: Reproduction) -> str:
    """What running the reproduction showed."""
    if r.error:
        return f"it fails: {r.error}"
    said = (f"with the pass {r.with_bad} of {r.size} values non-finite where eager's are finite, the rest apart by "
            f"{r.with_difference:.3g}; without it {r.without_bad} non-finite, apart by {r.without_difference:.3g}")
    return said + (f" (it prints: {r.printed})" if r.printed else "")


def missing(m: MissingInput) -> str:
    """In words without the exporter's value names (`add_34`, `view_3` mean nothing on a page): each value is a
    letter, x, y, ... in the order the sentence first meets it, and the sentence says what it is."""
    letters = _Letters()
    call = f"{m.op}({', '.join(letters[a] for a in m.args)})"
    gone = letters[m.missing]
    said = f"the node was traced from torch's {call}, but the optimized graph no longer computes {gone}"
    if m.was_op:
        was = ", ".join(letters[a] if isinstance(a, str) else f"{a:.3g}" for a in m.was_args)
        said += f" (exported with optimize=False, {gone} = {m.was_op}({was}))"
    if m.reads:
        said += f"; the node reads {letters[m.reads]} in its place"
    return said


class _Letters(dict):
    """Value names to letters, x, y, z, then u, v, w, ..., a new name getting the next free one."""

    ORDER = "xyzuvwabcdefghijklmnopqrst"

    def __missing__(self, name: str) -> str:
        self[name] = self.ORDER[len(self)] if len(self) < len(self.ORDER) else f"v{len(self)}"
        return self[name]


def value_range(r: ValueRange | None) -> str:
    if r is None:
        return "empty"
    return f"{r.dtype} {r.shape} in [{r.low:.3g}, {r.high:.3g}], {r.zeros} zeros"


def node_made(n: NodeMade | None) -> str:
    if n is None:
        return ""
    made = "NaN from inputs without one" if n.nan else "non-finite from finite inputs"
    return f"{n.count} of {n.size} values {made} (" + "; ".join(value_range(r) for r in n.reads) + ")"


def detail(spot: Localization) -> str:
    """The numbers that show the departure where it starts."""
    shows = spot.shows
    if spot.failed:
        return spot.failed
    if isinstance(shows, NonFiniteOutput):
        return (f"ORT's output is non-finite in {shows.count} of {shows.size} values where eager's is finite; the "
                f"node makes {node_made(spot.made)}")
    if isinstance(shows, BeyondRounding):
        return f"ORT errs {spot.ort_err:.3g} from float64, eager {spot.eager_err:.3g}: {shows.times:.3g} times eager's"
    if isinstance(shows, Rewritten):
        levels = ", ".join(f"{name} {error:.2g}" for name, error in shows.errors)
        said = (f"ORT's '{shows.level}' graph optimizations make it (error from float64 of {shows.output} by level: "
                f"{levels}; bound {shows.bound:.2g})")
        return said + (f"; exposing {spot.module}'s output alone removes it: the rewritten nodes read it"
                       if spot.module else "")
    if spot.kind is Kind.NAN_IN_EAGER:
        if isinstance(shows, NanInEager):
            at_float64 = ("" if shows.float64_nans is None else
                          f"; float64's holds {shows.float64_nans}: the arithmetic itself" if shows.float64_nans
                          else "; float64's holds none: float32's range")
            said = f"eager's output holds a NaN in {shows.count} of {shows.size} values{at_float64}"
        else:
            said = ("no module's output holds a NaN in eager: the forward's own operations, outside every module, "
                    "make it")
        return said + (f"; in the exported graph, this node makes {node_made(spot.made)}" if spot.node else "")
    if spot.node:
        return f"no module's output departs, but this node makes {node_made(spot.made)}"
    return "no module output departs from the float64 reference beyond the bound"


def stage(spot: Localization) -> str:
    """The stage's proof, or why no stage was named."""
    if spot.no_reference:
        return "no stage located: no float64 reference to measure each configuration against"
    if spot.switch_error:
        return f"no stage located: switching the pipeline failed ({spot.switch_error})"
    return proof(spot.proof) if spot.proof is not None else ""


def start(spot: Localization | None) -> str:
    """The module (or the model's own forward) and the node ("" without a localization)."""
    if spot is None:
        return ""
    node = f", its {spot.op_type} (ONNX node {spot.node} of the exported graph)" if spot.node else ""
    return (spot.module or "the model's own forward") + node


def where(spot: Localization | None) -> str:
    """Where it starts: the module and node, what shows it, the missing value, the stage that makes it ("" without
    a localization)."""
    if spot is None:
        return ""
    gone = f"; {missing(spot.missing)}" if spot.missing else ""
    proven = stage(spot)
    made = f"; made by {proven}" if spot.stage else (f"; {proven}" if proven else "")
    return f"{start(spot)}: {detail(spot)}{gone}{made}"


# Who fixes a stage: where a maintainer reports a defect the run traced to it.
UPSTREAM = {Stage.EXPORT_OPTIMIZER: "onnxscript (github.com/microsoft/onnxscript/issues)",
            Stage.ORT_OPTIMIZER: "ONNX Runtime (github.com/microsoft/onnxruntime/issues)",
            Stage.ORT_KERNELS: "ONNX Runtime (github.com/microsoft/onnxruntime/issues)",
            Stage.TRANSLATION: "PyTorch's ONNX exporter (github.com/pytorch/pytorch/issues, label 'module: onnx')"}


def remedy(r: Remedy | None) -> str:
    """What to do about a defect's stage ("" when no stage was named)."""
    if r is None:
        return ""
    if r.stage is Stage.MODEL:
        return ("the model's, not the export's: guard the value that breaks where it starts, or have the tester draw "
                "inputs that keep it finite")
    repro = f"; report it to {UPSTREAM.get(r.stage, 'upstream')}"
    if r.reproduces is not None:
        repro += (" with the reproduction in this report (it reproduces here)" if r.reproduces else
                  " with the class's graph (the reproduction in this report does not reproduce here)")
    if r.stage is Stage.EXPORT_OPTIMIZER:
        if r.pass_name:
            return f"export without onnxscript's rule {r.pass_name} (or with optimize=False), which removes it{repro}"
        return f"export with optimize=False, which removes it{repro}"
    if r.stage is Stage.ORT_OPTIMIZER:
        if r.pass_name:
            return f'run ONNX Runtime with disabled_optimizers=["{r.pass_name}"], which removes it{repro}'
        return (f"run ONNX Runtime at graph optimization level '{r.below or 'disabled'}', below the '{r.level}' level "
                f"that makes it (no single pass removes it){repro}")
    if r.stage is Stage.TRANSLATION:
        return f"fix the model's code, or the exporter's translation of it (no optimizer makes it){repro}"
    if r.stage is Stage.ORT_KERNELS:
        return (f"report it to ONNX Runtime ({r.provider}'s kernels) with the graph exported with optimize=False: no "
                "optimizer makes it, and onnx's reference evaluator computes the graph right")
    if r.stage is Stage.UNSEPARATED:
        return "export with optimize=False and compare the graph in another runtime: no optimizer makes it"
    return ""


def table(spots: list[Localization]) -> pd.DataFrame:
    """The localizations table, for people and for parquet: a row per defect localized, its numbers as measured
    and their words (what shows it, the missing value, the stage's proof, the remedy)."""
    rows = []
    for spot in spots:
        proof = spot.proof
        without = proof.without_at_output if proof is not None else None
        ran = proof.reproduction if proof is not None else None
        rows.append({
            "model": spot.model, "shape_mode": spot.shape_mode, "seed": spot.seed, "module": spot.module,
            "kind": spot.kind.value, "node": spot.node, "op_type": spot.op_type, "detail": detail(spot),
            "eager_err": spot.eager_err, "ort_err": spot.ort_err, "bound": spot.bound,
            "missing": missing(spot.missing) if spot.missing else "", "stage": spot.stage,
            "pass_name": spot.pass_name, "error_with": spot.error_with, "error_without": spot.error_without,
            "nonfinite_with": proof.with_pass.nonfinite if proof is not None and proof.with_pass else 0,
            "nonfinite_without": without.nonfinite if without is not None else 0,
            "stage_proof": stage(spot), "remedy": remedy(spot.remedy),
            "trials": len(proof.trials) if proof is not None else 0, "exports": proof.exports if proof else 0,
            "reproduction": ran.code if ran else "",
            "reproduces": ran.reproduces if ran else None,
            "reproduction_output": reproduction(ran) if ran else ""})
    return pd.DataFrame(rows)
