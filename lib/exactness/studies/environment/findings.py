"""The environment report's findings: each fact measured in this run set beside what IEEE 754 or the
investigation says, or new."""

from __future__ import annotations

import pandas as pd

from exactness import published
from exactness.studies.environment.study import FLOAT_DTYPES, SEED_ULP_MAGNITUDE, spacing_against_ieee
from exactness.workbook import machine
from exactness.workbook.findings import Finding, significant
from exactness.workbook.presentation import plural


def kernels_finding(hardware: dict) -> Finding:
    extensions = list(hardware.get("vector_extensions") or [])
    widest = next((x for x in ("avx512f", "avx2", "avx", "sve", "asimd", "sse4_2") if x in extensions), None)
    capability = str(hardware.get("torch_cpu_capability", "unknown"))
    claim = (f"torch dispatches {capability} kernels on {hardware.get('cpu_model', 'an unknown CPU')}"
             + (f" (widest extension {widest})" if widest else " (no vector extension found)")
             + ": absolute noise figures hold for machines with these kernels.")
    sets = machine.available_kernel_sets(extensions)
    claim += (f" The near-tie study can rerun eager here with the kernels of narrower CPUs (cpu_kernels: "
              f"{', '.join(sets)}); ONNX Runtime's cannot be chosen.")
    ours = f"{capability}; extensions: {', '.join(extensions) or 'none'}; kernel sets: {', '.join(sets)}"
    return Finding(claim, ours, "new", evidence="hardware table")


def threads_finding(hardware: dict) -> Finding:
    torch_threads, usable = int(hardware["torch_intra_op_threads"]), int(hardware["usable_cpus"])
    ort_setting = int(hardware["ort_intra_op_threads_setting"])
    ort_words = ("ORT's default (0) uses one thread per physical core, as its documentation says" if ort_setting == 0
                 else f"ORT's default is {plural(ort_setting, 'thread')} inside one op")
    split = ("a reduction may be split over several threads, so its summation order depends on the thread count"
             if torch_threads > 1 or ort_setting != 1 else "reductions run on one thread")
    claim = (f"torch splits one op over {plural(torch_threads, 'thread')} of {plural(usable, 'usable CPU')} and "
             f"{ort_words}: {split}.")
    return Finding(claim, f"torch {torch_threads} threads, ORT setting {ort_setting}, {usable} usable CPUs", "new",
                   evidence="hardware table")


def subnormals_finding(behaviour: dict) -> Finding:
    probes = {k.removesuffix("_keeps_subnormals"): bool(v) for k, v in behaviour.items()
              if k.endswith("_keeps_subnormals")}
    flushed = [name for name, kept in probes.items() if not kept]
    claim = ("Every runtime keeps float32 subnormals (1e-38 halved stays non-zero), so results near zero are not "
             "flushed differently on the two sides." if not flushed
             else f"Subnormal float32 values are flushed to zero by {', '.join(flushed)}: results near zero can "
                  "differ by that between runtimes.")
    ours = ", ".join(f"{name} {'keeps' if kept else 'flushes'}" for name, kept in probes.items())
    return Finding(claim, ours, "new", evidence="float behaviour table")


def spacing_finding(checked: pd.DataFrame) -> Finding:
    """The investigation's own spacing figure (1 ulp near 10) where this run tabulated it, else the IEEE check alone."""
    beyond = checked[~checked.representable]
    checked = checked[checked.representable]  # beyond a dtype's range there is no spacing to compare
    wrong = checked[~checked.agrees]
    ieee_words = (f"every one of the {len(checked)} tabulated spacings ({len(checked.magnitude.unique())} magnitudes, "
                  f"{len(FLOAT_DTYPES)} dtypes) is the IEEE 754 value" if not len(wrong)
                  else f"{len(wrong)} of {len(checked)} tabulated spacings differ from IEEE 754 (first: "
                       f"{wrong.dtype.iloc[0]} at {significant(wrong.magnitude.iloc[0])})")
    if len(beyond):
        ieee_words += (f" ({len(beyond)} magnitude-dtype pairs lie beyond the dtype's range and are not "
                       f"compared, first: {beyond.dtype.iloc[0]} at {significant(beyond.magnitude.iloc[0])})")
    # a spacing is arithmetic: on a machine whose floats are IEEE 754 it is a fact checked, not a result reproduced
    verdict = "fact" if not len(wrong) else "differs"
    why = "" if not len(wrong) else "unexplained: IEEE 754 fixes every spacing"
    at_seed = checked[(checked.dtype == "float32") & (checked.magnitude == SEED_ULP_MAGNITUDE)]
    if not len(at_seed):
        if verdict == "differs":  # no investigation's figure to set beside it: a new finding that says so
            return Finding(f"Float spacing: {ieee_words}.", ieee_words, "new", evidence="float spacing table")
        return Finding(f"Float spacing (a fact of IEEE 754 arithmetic, checked here): {ieee_words}.", ieee_words,
                       "fact", evidence="float spacing table")
    ours_ulp, seed_ulp = float(at_seed.measured_ulp.iloc[0]), published.value("ulp_at_logit_10")
    same = significant(ours_ulp) == significant(seed_ulp)  # the investigation quotes two significant digits
    if not same:
        verdict, why = "differs", "unexplained: IEEE 754 fixes this spacing"
    claim = (f"One float32 ulp near a logit of 10 is {significant(ours_ulp, 3)}, "
             f"{'the figure the investigation quotes' if same else 'unlike the investigation figure'} (a fact of IEEE "
             f"754 arithmetic, checked here, not a measurement that could have disagreed); {ieee_words}.")
    return Finding(claim, f"{significant(ours_ulp, 3)} at magnitude 10 (float32)", verdict,
                   source=f"{significant(seed_ulp)} (transformers #50575, section 3, logits of "
                          f"Wav2Vec2ConformerForPreTraining)", why=why, evidence="float spacing table")


def versions_finding(versions: dict) -> Finding:
    claim = (f"The batch ran torch {versions.get('torch')} against onnxruntime {versions.get('onnxruntime')} "
             f"(transformers {versions.get('transformers')}, Python {versions.get('python')}); another version can "
             "change kernels and so the noise.")
    return Finding(claim, ", ".join(f"{k} {v}" for k, v in versions.items()), "new", evidence="versions table")


def findings(versions: dict, hardware: dict, behaviour: dict, spacing: pd.DataFrame) -> list[Finding]:
    return [kernels_finding(hardware), threads_finding(hardware), subnormals_finding(behaviour),
            spacing_finding(spacing_against_ieee(spacing)), versions_finding(versions)]
