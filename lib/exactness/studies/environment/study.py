"""The environment study: the machine and software facts that decide how floats round in every other report
of the batch, measured in the run, and the findings the report opens with.

Everything here takes seconds: the environment study is the first run of every batch.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from exactness import published
from exactness.workbook import machine
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import Finding, count, significant
from exactness.workbook.presentation import plural

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# Explicit mantissa bits: 1 ulp at a magnitude m is 2 ** (floor(log2 m) - bits) for a normal m (IEEE 754;
# bfloat16 keeps float32's exponent with 7 bits).
MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
# The smallest and largest exponent of a normal number: below the first, spacing stops shrinking (subnormals);
# above the second (and its mantissa's top), the value is not representable.
EXPONENTS = {"float16": (-14, 15), "bfloat16": (-126, 127), "float32": (-126, 127), "float64": (-1022, 1023)}
SEED_ULP_MAGNITUDE = 10.0  # transformers #50575, section 3: "with logits around 10, 1 ulp is 9.5e-7"


# Each recorded fact in words, for the tables a person reads (the tables under tables/ keep the names).
FACT_WORDS = {
    "cpu_model": "CPU",
    "architecture": "architecture",
    "logical_cpus": "logical CPUs",
    "usable_cpus": "CPUs this run may use",
    "vector_extensions": "vector extensions",
    "torch_cpu_capability": "kernels torch dispatches",
    "torch_intra_op_threads": "torch: threads inside one op",
    "torch_inter_op_threads": "torch: threads running ops side by side",
    "ort_intra_op_threads_setting": "ONNX Runtime: threads inside one op (0: one per physical core)",
    "ort_inter_op_threads_setting": "ONNX Runtime: threads running ops side by side (0: its default)",
    "numpy_keeps_subnormals": "numpy keeps subnormal floats",
    "torch_keeps_subnormals": "torch keeps subnormal floats",
    "ort_keeps_subnormals": "ONNX Runtime keeps subnormal floats",
    "ort_available_providers": "ONNX Runtime execution providers",
    "ort_default_graph_optimization_level": "ONNX Runtime's graph optimisation by default",
}
OPTIMISATION_WORDS = {"ORT_DISABLE_ALL": "none", "ORT_ENABLE_BASIC": "basic (constant folding, redundant nodes)",
                      "ORT_ENABLE_EXTENDED": "extended (basic and fused operators)",
                      "ORT_ENABLE_LAYOUT": "layout (extended and memory layouts)",
                      "ORT_ENABLE_ALL": "all (every graph optimisation)"}


def optimisation_words(level: object) -> str:
    """`GraphOptimizationLevel.ORT_ENABLE_ALL` as a person says it: 'all (every graph optimisation)'."""
    name = str(level).rsplit(".", 1)[-1]
    return OPTIMISATION_WORDS.get(name, name)


def facts_for_people(facts: dict[str, object]) -> pd.DataFrame:
    """fact, value: each fact named in words, yes/no for a probe, an optimisation level by what it does."""
    def value(key, v):
        if isinstance(v, bool):
            return "yes" if v else "no"
        if key == "ort_default_graph_optimization_level":
            return optimisation_words(v)
        return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return pd.DataFrame([(FACT_WORDS.get(k, k.replace("_", " ")), value(k, v)) for k, v in facts.items()],
                        columns=["fact", "value"])


def hardware_facts() -> dict[str, object]:
    """CPU, vector extensions, the kernels torch dispatches and the thread counts, as one flat record."""
    return {**machine.cpu_facts(), "torch_cpu_capability": machine.torch_cpu_capability(), **machine.thread_counts()}


def float_behaviour() -> dict[str, object]:
    return {**machine.denormal_behaviour(), **machine.ort_settings()}


def representable(magnitude: float, dtype: str) -> bool:
    """Whether `magnitude` rounds to a finite value of `dtype` (below the largest finite value plus half an
    ulp; the round-to-nearest boundary is close enough here: the study's magnitudes are far from it)."""
    bits, (_, top) = MANTISSA_BITS[dtype], EXPONENTS[dtype]
    return abs(magnitude) < (2.0 - 2.0 ** -bits) * 2.0 ** top


def ieee_ulp(magnitude: float, dtype: str) -> float:
    """The spacing IEEE 754 prescribes just above `magnitude` in `dtype`: 2 ** (exponent - mantissa bits),
    with the exponent held at its normal minimum for subnormals (their spacing is constant); NaN where the
    magnitude is beyond the dtype's range."""
    if not representable(magnitude, dtype):
        return math.nan
    lowest = EXPONENTS[dtype][0]
    exponent = max(math.floor(math.log2(abs(magnitude))), lowest) if magnitude else lowest
    return 2.0 ** (exponent - MANTISSA_BITS[dtype])


def spacing_against_ieee(spacing: pd.DataFrame) -> pd.DataFrame:
    """One row per magnitude and dtype: the measured spacing, the IEEE expectation and whether they agree
    exactly (both are powers of two, so equality is the right test)."""
    rows = []
    for row in spacing.itertuples(index=False):
        for dtype in FLOAT_DTYPES:
            measured, expected = float(getattr(row, dtype)), ieee_ulp(row.magnitude, dtype)
            rows.append({"magnitude": float(row.magnitude), "dtype": dtype, "measured_ulp": measured,
                         "ieee_ulp": expected, "representable": not math.isnan(expected),
                         "agrees": measured == expected})
    return pd.DataFrame(rows, columns=["magnitude", "dtype", "measured_ulp", "ieee_ulp", "representable", "agrees"])


# ---------------------------------------------------------------------------------------------------------
# Findings: every sentence is computed from the facts measured in this run


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


ANSWER_COLUMNS = Columns(subject="machine", cause="floats", action="what it means for the other reports",
                         rate="", proof="measured")


def answers(versions: dict, hardware: dict, behaviour: dict, spacing: pd.DataFrame) -> list[Answer]:
    """The machine in one line: the CPU and its kernels, whether floats behave as IEEE 754 says here, and the
    versions another run must match for its float figures to compare."""
    checked = spacing_against_ieee(spacing)
    checked = checked[checked.representable]
    wrong = checked[~checked.agrees]
    flushed = flushing_runtimes(behaviour)
    capability = str(hardware.get("torch_cpu_capability", "unknown"))
    subject = (f"{hardware.get('cpu_model', 'an unknown CPU')} ({plural(int(hardware['usable_cpus']), 'CPU')}, "
               f"{capability} kernels)")
    cause = "flushes subnormals" if flushed else "not IEEE spacing" if len(wrong) else "IEEE floats"
    threads = int(hardware["torch_intra_op_threads"])
    action = (f"float figures compare with runs on {capability} kernels, torch {versions.get('torch')} and "
              f"onnxruntime {versions.get('onnxruntime')}, at the thread counts each report states (this machine's "
              f"torch default: {plural(threads, 'thread')})")
    kept = ("subnormals kept by every runtime" if not flushed else f"subnormals flushed by {', '.join(flushed)}")
    proof = (f"{kept}; {count(len(checked) - len(wrong))} of {count(len(checked))} float spacings the IEEE 754 value; "
             f"ONNX Runtime optimisation: {optimisation_words(behaviour.get('ort_default_graph_optimization_level'))}")
    return [Answer(subject, cause, action, "", proof)]


def relative_spacing_range(spacing: pd.DataFrame) -> tuple[float, float]:
    relative = np.asarray(spacing.float32_relative, dtype=float)
    return float(relative.min()), float(relative.max())


# ---------------------------------------------------------------------------------------------------------
# The notebook's sentences, one per section: each reads its facts and nothing else

def versions_sentence(versions: dict) -> str:
    return (f"torch {versions['torch']} against onnxruntime {versions['onnxruntime']} with transformers "
            f"{versions['transformers']}, on Python {versions['python']}.")


def hardware_sentence(hardware: dict) -> str:
    ort = int(hardware["ort_intra_op_threads_setting"])
    ort_words = "one thread per physical core (its setting 0)" if ort == 0 else plural(ort, "thread")
    return (f"{plural(int(hardware['usable_cpus']), 'usable CPU')} ({hardware['cpu_model']}); torch dispatches "
            f"{hardware['torch_cpu_capability']} kernels and splits one op over "
            f"{plural(int(hardware['torch_intra_op_threads']), 'thread')}; ONNX Runtime over {ort_words}.")


def flushing_runtimes(behaviour: dict) -> list[str]:
    """The runtimes whose subnormal probe came back as zero."""
    return [name.removesuffix("_keeps_subnormals") for name, kept in behaviour.items()
            if name.endswith("_keeps_subnormals") and not kept]


def subnormals_sentence(behaviour: dict) -> str:
    flushed = flushing_runtimes(behaviour)
    if not flushed:
        return "Subnormal float32 values are kept by every runtime."
    return f"Subnormals are flushed to zero by: {', '.join(flushed)}; results near zero can differ by that."


def float32_ulp_at_one(spacing: pd.DataFrame) -> float | None:
    at_one = spacing.loc[spacing.magnitude == 1.0, "float32"]
    return float(at_one.iloc[0]) if len(at_one) else None


def spacing_sentence(spacing: pd.DataFrame, checked: pd.DataFrame) -> str:
    at_one = float32_ulp_at_one(spacing)
    return ((f"At magnitude 1, one float32 ulp is {at_one:.3g}; " if at_one is not None else "")
            + f"{count(int(checked.agrees.sum()))} of {count(len(checked))} measured spacings equal the IEEE 754 "
            "value.")


def summary_values(versions: dict, hardware: dict, behaviour: dict, spacing: pd.DataFrame) -> dict:
    return {"cpu": hardware["cpu_model"], "torch": versions["torch"], "onnxruntime": versions["onnxruntime"],
            "torch_threads": hardware["torch_intra_op_threads"], "subnormals_kept": not flushing_runtimes(behaviour),
            "float32_ulp_at_1": float32_ulp_at_one(spacing)}
